"""The sample networks of engine/models/ written in Python, layer for layer and op for op, with
the same class names, child names and seeds as their C++ twins (ms.models.load(name))."""

import modeflow as ms
from modeflow import nn, ops


class Mlp(nn.Cell):
    def __init__(self, seed):
        super().__init__()
        self.fc1 = nn.Dense(784, 512, seed=seed * 64 + 0)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Dense(512, 512, seed=seed * 64 + 1)
        self.relu2 = nn.ReLU()
        self.fc3 = nn.Dense(512, 10, seed=seed * 64 + 2)

    def construct(self, x):
        return self.fc3(self.relu2(self.fc2(self.relu1(self.fc1(x)))))


class Cnn(nn.Cell):
    def __init__(self, seed):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, pad_mode="pad", padding=1, has_bias=True,
                               seed=seed * 64 + 1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(32, 32, 3, pad_mode="pad", padding=1, has_bias=True,
                               seed=seed * 64 + 2)
        self.relu2 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2, 2)
        self.conv3 = nn.Conv2d(32, 64, 3, pad_mode="pad", padding=1, has_bias=True,
                               seed=seed * 64 + 3)
        self.relu3 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2, 2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(4096, 128, seed=seed * 64 + 4)
        self.relu4 = nn.ReLU()
        self.fc2 = nn.Dense(128, 10, seed=seed * 64 + 5)

    def construct(self, x):
        for layer in (self.conv1, self.relu1, self.conv2, self.relu2, self.pool1, self.conv3,
                      self.relu3, self.pool2, self.flatten, self.fc1, self.relu4, self.fc2):
            x = layer(x)
        return x


class Transformer(nn.Cell):
    def __init__(self, seed):
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(256, 4, 1024, seed=seed)

    def construct(self, x):
        return self.encoder(x)


class Elementwise(nn.Cell):
    def construct(self, x):
        a = ops.gelu_tanh(x * 1.5 + 0.5)
        b = a * ops.sigmoid(x)
        return b + ops.tanh(x) - 0.25 * x


class ClampChain(nn.Cell):
    def construct(self, x):
        y = x * 1.5 + 0.5
        y = ops.minimum(ops.relu(y), 6.0)
        return y - 0.25 * x + abs(x)


class LayerNormNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm((1024,))

    def construct(self, x):
        return self.norm(x)


class SoftmaxNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(-1)

    def construct(self, x):
        return self.softmax(x)


class SoftmaxOpsNet(nn.Cell):
    def construct(self, x):
        e = ops.exp(x - ops.reduce_max(x, axes=[-1], keep_dims=True))
        return e / ops.reduce_sum(e, axes=[-1], keep_dims=True)


class LayerNormOpsNet(nn.Cell):
    def __init__(self, seed):
        super().__init__()
        self.gamma = ms.Parameter(ms.Tensor.randn((1024,), seed=seed, stddev=0.1))
        self.beta = ms.Parameter(ms.Tensor.randn((1024,), seed=seed + 1, stddev=0.1))

    def construct(self, x):
        centred = x - ops.reduce_mean(x, axes=[-1], keep_dims=True)
        var = ops.reduce_mean(centred * centred, axes=[-1], keep_dims=True)
        rstd = 1.0 / ops.sqrt(var + 1e-5)
        return centred * rstd * self.gamma + self.beta


class Chain(nn.Cell):
    def __init__(self, seed):
        super().__init__()
        self.step = ms.Parameter(ms.Tensor.randn((16,), seed=seed, stddev=1e-3))

    def construct(self, x):
        y = x
        for _ in range(1000):
            y = y + self.step
        return y


class LeNet5(nn.Cell):
    def __init__(self, seed):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="valid", has_bias=True, seed=seed * 64 + 1)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True, seed=seed * 64 + 2)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2, 2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(400, 120, seed=seed * 64 + 3)
        self.relu3 = nn.ReLU()
        self.fc2 = nn.Dense(120, 84, seed=seed * 64 + 4)
        self.relu4 = nn.ReLU()
        self.fc3 = nn.Dense(84, 10, seed=seed * 64 + 5)

    def construct(self, x):
        for layer in (self.conv1, self.relu1, self.pool1, self.conv2, self.relu2, self.pool2,
                      self.flatten, self.fc1, self.relu3, self.fc2, self.relu4, self.fc3):
            x = layer(x)
        return x


# name -> a function of the seed that builds the Python twin.
TWINS = {
    "mlp": Mlp,
    "cnn": Cnn,
    "transformer": Transformer,
    "elementwise": lambda seed: Elementwise(),
    "clamp_chain": lambda seed: ClampChain(),
    "layernorm": lambda seed: LayerNormNet(),
    "softmax": lambda seed: SoftmaxNet(),
    "softmax_ops": lambda seed: SoftmaxOpsNet(),
    "layernorm_ops": LayerNormOpsNet,
    "chain": Chain,
    "lenet5": LeNet5,
}
