import torch, numpy as np
# Writes dynamic_mlp.onnx (a PyTorch export with dynamic_axes) and its cases; needs torch. Run
# from this folder: python3 make_dynamic_mlp.py
torch.manual_seed(0)
class Net(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.fc = torch.nn.Linear(8, 16)
    def forward(s, x):
        y = torch.relu(s.fc(x))
        return y.reshape(y.shape[0], -1)
m = Net().eval()
torch.onnx.export(m, torch.randn(2, 3, 8), "dynamic_mlp.onnx", opset_version=13, input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "flat"}})
rng = np.random.default_rng(0)
arrays = {}
for b, s in ((1, 3), (7, 5), (64, 2)):
    x = rng.standard_normal((b, s, 8)).astype(np.float32)
    with torch.no_grad(): y = m(torch.from_numpy(x)).numpy()
    arrays[f"x_{b}_{s}"] = x; arrays[f"y_{b}_{s}"] = y
np.savez_compressed("dynamic_mlp_cases.npz", **arrays)
