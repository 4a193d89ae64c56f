// `mf train NET --data fashion-mnist`: trains a sample network on Fashion-MNIST with MindSpore's
// pieces (WithLossCell, TrainOneStepCell, an optimizer) in the mode the context says: a progress
// line (step, loss, steps/s, ETA), the test accuracy after each epoch, the step's peak memory, an
// SVG of the loss curve, and optionally a MindSpore checkpoint of the trained weights. Started by
// `mf launch`, each worker trains on its shard of the data with the gradients averaged over the
// workers (data parallel), and worker 0 reports and writes the files.

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>

#include "context/parallel_context.h"
#include "engine/data/batches.h"
#include "engine/data/fashion_mnist.h"
#include "engine/distributed/communication.h"
#include "engine/engine_state.h"
#include "engine/io/checkpoint.h"
#include "engine/models/registry.h"
#include "engine/ops.h"
#include "engine/train/train_cells.h"
#include "runtime/comm/communicator.h"
#include "runtime/memory_format.h"
#include "runtime/memory_pool.h"
#include "tools/commands.h"
#include "tools/loss_curve.h"

namespace mf::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct TrainOptions {
  std::string target;
  std::string data = "fashion-mnist";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 1;
  int64_t batch = 64;
  std::string optimizer = "momentum";
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 0.0;
  uint64_t seed = 0;
  int64_t steps = 0;  // 0: every batch of an epoch
  bool shuffle = true;
  std::string checkpoint;
  std::string loss_curve;
};

// How the network takes Fashion-MNIST's 1x28x28 images, from its sample input's shape: flat
// (784), as they are (1x28x28), or padded with zeros to 1x32x32 (LeNet5's input).
enum class Layout { kFlat, kImage, kPadded32 };

Layout layout_for(const models::NetSpec& spec, uint64_t seed) {
  const Shape s = spec.make_input(seed).shape();
  if (s.size() == 2 && s[1] == 784) return Layout::kFlat;
  if (s.size() == 4 && s[1] == 1 && s[2] == 28 && s[3] == 28) return Layout::kImage;
  if (s.size() == 4 && s[1] == 1 && s[2] == 32 && s[3] == 32) return Layout::kPadded32;
  MF_FAIL(InvalidArgument, "network '", spec.name, "' takes inputs of shape ",
          ir::shape_to_string(s),
          "; mf train feeds Fashion-MNIST's 1x28x28 images to networks taking 784 values, 1x28x28 "
          "or 1x32x32 images (mlp, lenet5)");
}

// Images as float32 in [0, 1], laid out for the network.
data::ImageTransform transform_for(Layout layout) {
  if (layout == Layout::kImage) return data::rescale_to_chw();
  return [layout](const data::ImageSet& set, std::span<const int64_t> indices) {
    const int64_t b = int64_t(indices.size());
    const int64_t side = layout == Layout::kPadded32 ? 32 : 28, pad = (side - 28) / 2;
    Tensor out =
        layout == Layout::kFlat ? Tensor::zeros({b, 784}) : Tensor::zeros({b, 1, side, side});
    float* p = static_cast<float*>(out.mutable_raw_data());
    for (int64_t i = 0; i < b; ++i) {
      const uint8_t* img = set.images.data() + indices[size_t(i)] * set.image_bytes();
      float* dst = p + i * side * side;
      for (int64_t r = 0; r < 28; ++r) {
        for (int64_t c = 0; c < 28; ++c) {
          dst[(r + pad) * side + c + pad] = float(img[r * 28 + c]) / 255.0f;
        }
      }
    }
    return out;
  };
}

std::shared_ptr<nn::Optimizer> make_optimizer(const TrainOptions& o, const nn::Cell& net) {
  auto group = nn::trainable_group(net);
  if (o.optimizer == "sgd") {
    return std::make_shared<nn::SGD>(
        group, nn::SGDOptions{
                   .learning_rate = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
  }
  if (o.optimizer == "momentum") {
    return std::make_shared<nn::Momentum>(
        group, nn::MomentumOptions{
                   .learning_rate = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
  }
  if (o.optimizer == "adam") {
    return std::make_shared<nn::Adam>(
        group, nn::AdamOptions{.learning_rate = o.lr, .weight_decay = o.weight_decay});
  }
  if (o.optimizer == "adamw") {
    return std::make_shared<nn::AdamWeightDecay>(
        group, nn::AdamWeightDecayOptions{.learning_rate = o.lr, .weight_decay = o.weight_decay});
  }
  MF_FAIL(InvalidArgument, "--optimizer '", echo(o.optimizer),
          "' is not one of sgd, momentum, adam, adamw");
}

double accuracy(nn::Cell& net, data::Batches& test) {
  int64_t correct = 0, total = 0;
  test.start_epoch(0);
  data::Batch batch;
  while (test.next(batch)) {
    const Tensor logits = net(batch.images);
    const auto v = logits.to_vector<float>();
    const auto labels = batch.labels.to_vector<int32_t>();
    const int64_t classes = logits.shape()[1];
    for (size_t i = 0; i < labels.size(); ++i) {
      const float* row = v.data() + i * size_t(classes);
      correct += (std::max_element(row, row + classes) - row) == labels[i];
    }
    total += int64_t(labels.size());
  }
  return total == 0 ? 0.0 : double(correct) / double(total);
}

std::string eta_text(double seconds) {
  char buf[32];
  const int s = int(std::max(seconds, 0.0));
  std::snprintf(buf, sizeof(buf), "%d:%02d", s / 60, s % 60);
  return buf;
}

void train(const TrainOptions& o) {
  MF_CHECK(o.data == "fashion-mnist", InvalidArgument, "--data '", echo(o.data),
           "': the dataset mf train reads is fashion-mnist");
  MF_CHECK(o.epochs >= 1, InvalidArgument, "--epochs must be at least 1, got ", o.epochs);
  MF_CHECK(o.batch >= 1 && o.batch <= 65536, InvalidArgument, "--batch must be in [1, 65536], got ",
           o.batch);
  MF_CHECK(o.steps >= 0, InvalidArgument, "--steps must be 0 (all) or positive, got ", o.steps);
  const models::NetSpec& spec = models::find_net(o.target);
  const Layout layout = layout_for(spec, o.seed);
  // In a job (MS_WORKER_NUM set, as mf launch does): data parallel, --batch per worker, the
  // gradients averaged, so the learning rate means what it means for one process on the global
  // batch.
  communication::init();
  // Leaving waits for the other workers at a barrier; a worker that fails leaves without it (the
  // others then name it as gone).
  struct Release {
    ~Release() {
      if (std::uncaught_exceptions() == 0) communication::release();
    }
  } release_on_exit;
  const int workers = communication::get_group_size(), rank = communication::get_rank();
  if (workers > 1) {
    context::set_auto_parallel_context(
        {{"parallel_mode", "data_parallel"}, {"gradients_mean", true}});
  }
  const bool reporter = rank == 0;
  auto train_set =
      std::make_shared<const data::ImageSet>(data::load_fashion_mnist(o.data_dir, "train"));
  auto test_set =
      std::make_shared<const data::ImageSet>(data::load_fashion_mnist(o.data_dir, "test"));
  data::Batches train_batches(
      train_set,
      {.batch_size = o.batch,
       .drop_remainder = true,
       .shuffle = o.shuffle,
       .seed = o.seed,
       .num_shards = workers > 1 ? std::optional<int64_t>(workers) : std::nullopt,
       .shard_id = workers > 1 ? std::optional<int64_t>(rank) : std::nullopt},
      transform_for(layout));
  data::Batches test_batches(test_set, {.batch_size = 256}, transform_for(layout));
  std::shared_ptr<nn::Cell> net = spec.make(o.seed);
  auto with_loss = std::make_shared<nn::WithLossCell>(
      net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, nn::Reduction::kMean));
  nn::TrainOneStepCell step(with_loss, make_optimizer(o, *net));

  const bool graph = engine::current_policy()->mode.value == context::ExecutionMode::kGraph;
  int64_t per_epoch =
      o.steps > 0 ? std::min(o.steps, train_batches.num_batches()) : train_batches.num_batches();
  // Shards may differ by a sample, and so by a batch: every worker takes the fewest, so all make
  // the same number of steps (of all-reduces).
  runtime::comm::world()->all_reduce(&per_epoch, 1, DType::kInt64, runtime::comm::ReduceOp::kMin,
                                     "steps per epoch");
  MF_CHECK(per_epoch > 0, InvalidArgument, "--batch ", o.batch, " is larger than the ",
           train_batches.num_samples(), " training images");
  std::printf(
      "training %s on Fashion-MNIST (%lld train, %lld test images) in %s, %s lr %g, batch %lld, "
      "%d epoch(s) of %lld steps\n",
      spec.name.c_str(), (long long)train_set->size(), (long long)test_set->size(),
      graph ? "GRAPH_MODE" : "PYNATIVE_MODE", o.optimizer.c_str(), o.lr, (long long)o.batch,
      o.epochs, (long long)per_epoch);
  if (workers > 1) {
    std::printf("data parallel: %d workers, each on its shard of %lld images, gradients averaged\n",
                workers, (long long)train_batches.num_samples());
  }
  const bool tty = isatty(fileno(stdout)) != 0;
  char lr_text[32];
  std::snprintf(lr_text, sizeof(lr_text), "%g", o.lr);
  LossCurve curve;
  curve.title = spec.name + " on Fashion-MNIST, " + o.optimizer + " lr " + lr_text +
                (graph ? ", GRAPH_MODE" : ", PYNATIVE_MODE");
  const int64_t total = per_epoch * o.epochs;
  const auto run_start = Clock::now();
  size_t step_peak = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    train_batches.start_epoch(epoch);
    net->set_train(true);
    data::Batch batch;
    for (int64_t s = 0; s < per_epoch && train_batches.next(batch); ++s) {
      runtime::default_pool().reset_peak();
      const double loss = step(batch.images, batch.labels).to_doubles().at(0);
      step_peak = std::max(step_peak, runtime::default_pool().stats().peak_in_use_bytes);
      MF_CHECK(std::isfinite(loss), InvalidArgument, "the loss became ", loss, " at epoch ",
               epoch + 1, " step ", s + 1, "; lower --lr");
      curve.losses.push_back(loss);
      const int64_t done = int64_t(curve.losses.size());
      if (tty || done % 100 == 0 || s + 1 == per_epoch) {
        const double seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
        const double rate = double(done) / std::max(seconds, 1e-9);
        std::printf("%sepoch %d/%d step %lld/%lld loss %.4f  %.1f steps/s  ETA %s%s",
                    tty ? "\r" : "", epoch + 1, o.epochs, (long long)(s + 1), (long long)per_epoch,
                    loss, rate, eta_text(double(total - done) / rate).c_str(), tty ? "   " : "\n");
        std::fflush(stdout);
      }
    }
    net->set_train(false);
    const double acc = accuracy(*net, test_batches);
    curve.epoch_accuracy.push_back(acc);
    curve.epoch_end_steps.push_back(int64_t(curve.losses.size()));
    std::printf("%sepoch %d: test accuracy %.2f%%\n", tty ? "\n" : "", epoch + 1, acc * 100);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
  std::printf("trained %lld steps in %.2f s (%.1f steps/s); step peak memory %s", (long long)total,
              seconds, double(total) / seconds, runtime::format_bytes(step_peak).c_str());
  if (graph) {
    std::printf(" (planned %s)",
                runtime::format_bytes(step.graph_report().planned_peak_bytes).c_str());
  }
  std::printf("\n");
  if (!reporter) return;  // worker 0 writes the files: every worker holds the same weights
  if (!o.checkpoint.empty()) {
    checkpoint::save(o.checkpoint, *net);
    std::printf("checkpoint: %s\n", o.checkpoint.c_str());
  }
  std::filesystem::path svg = o.loss_curve;
  if (svg.empty()) {
    svg = o.checkpoint.empty() ? std::filesystem::path(spec.name + "_loss.svg")
                               : std::filesystem::path(o.checkpoint).replace_extension(".svg");
  }
  write_loss_curve_svg(curve, svg);
  std::printf("loss curve: %s\n", svg.string().c_str());
}

}  // namespace

void add_train_command(CLI::App& app, GlobalOptions& global) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a sample network (mlp, lenet5) on Fashion-MNIST in the context's mode");
  cmd->add_option("target", o->target,
                  "A network from `mf nets` taking 784 values or 1x28x28 / "
                  "1x32x32 images")
      ->required();
  cmd->add_option("--data", o->data, "The dataset (fashion-mnist)");
  cmd->add_option("--data-dir", o->data_dir,
                  "Where its IDX files are (default: Debian's dataset-fashion-mnist)");
  cmd->add_option("--epochs", o->epochs, "Epochs (default 1)");
  cmd->add_option("--batch", o->batch, "Batch size (default 64)");
  cmd->add_option("--optimizer", o->optimizer, "sgd, momentum (default), adam or adamw");
  cmd->add_option("--lr", o->lr, "Learning rate (default 0.01)");
  cmd->add_option("--momentum", o->momentum, "Momentum of sgd and momentum (default 0.9)");
  cmd->add_option("--weight-decay", o->weight_decay, "Weight decay (default 0)");
  cmd->add_option("--seed", o->seed, "Seed of the weights and the shuffling (default 0)");
  cmd->add_option("--steps", o->steps, "Steps per epoch (default: every batch)");
  cmd->add_flag("!--no-shuffle", o->shuffle, "Keep the training set's order");
  cmd->add_option("--checkpoint", o->checkpoint, "Save the trained weights here (.ckpt)");
  cmd->add_option("--loss-curve", o->loss_curve,
                  "The loss curve's SVG (default: beside the checkpoint, or NET_loss.svg)");
  add_global_options(*cmd, global);
  cmd->callback([o, &global] {
    apply_global_options(global);
    train(*o);
  });
}

}  // namespace mf::tools
