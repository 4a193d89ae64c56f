#pragma once
// The loss curve of a training run as a small standalone SVG: the loss per step (thin), its moving
// average (thick), and the test accuracy after each epoch as labelled points.

#include <filesystem>
#include <string>
#include <vector>

namespace mf::tools {

struct LossCurve {
  std::string title;
  std::vector<double> losses;            // one per step
  std::vector<double> epoch_accuracy;    // one per epoch, in [0, 1]
  std::vector<int64_t> epoch_end_steps;  // the step count at each epoch's end
};

// Written atomically (a temporary file renamed in place).
void write_loss_curve_svg(const LossCurve& curve, const std::filesystem::path& file);

}  // namespace mf::tools
