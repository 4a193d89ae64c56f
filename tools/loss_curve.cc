#include "tools/loss_curve.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.h"
#include "base/file_reader.h"
#include "tools/bench/report.h"

namespace mf::tools {

void write_loss_curve_svg(const LossCurve& curve, const std::filesystem::path& file) {
  constexpr double kWidth = 720, kHeight = 360, kLeft = 60, kRight = 60, kTop = 40, kBottom = 40;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  std::vector<double> finite;
  for (double v : curve.losses) {
    if (std::isfinite(v)) finite.push_back(v);
  }
  const double max_loss =
      finite.empty() ? 1.0 : std::max(*std::max_element(finite.begin(), finite.end()), 1e-12);
  const size_t n = std::max<size_t>(curve.losses.size(), 2);
  auto x_of = [&](double step) { return kLeft + plot_w * step / double(n - 1); };
  auto y_of = [&](double loss) {
    return kTop + plot_h * (1 - std::clamp(loss / max_loss, 0.0, 1.0));
  };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kLeft << "\" y=\"24\" font-size=\"14\">" << bench::xml_escape(curve.title)
      << "</text>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << kTop + plot_h << "\" x2=\"" << kLeft + plot_w
      << "\" y2=\"" << kTop + plot_h << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\""
      << kTop + plot_h << "\" stroke=\"black\"/>\n"
      << "<text x=\"4\" y=\"" << kTop + 4 << "\">" << max_loss << "</text>\n"
      << "<text x=\"4\" y=\"" << kTop + plot_h << "\">0</text>\n"
      << "<text x=\"" << kLeft + plot_w / 2 - 20 << "\" y=\"" << kHeight - 10 << "\">step ("
      << curve.losses.size() << ")</text>\n";
  auto polyline = [&](const std::vector<double>& values, const char* style) {
    svg << "<polyline fill=\"none\" " << style << " points=\"";
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isfinite(values[i])) svg << x_of(double(i)) << ',' << y_of(values[i]) << ' ';
    }
    svg << "\"/>\n";
  };
  polyline(curve.losses, "stroke=\"#9ab\" stroke-width=\"1\"");
  std::vector<double> smooth(curve.losses.size());
  double avg = curve.losses.empty() ? 0 : curve.losses[0];
  for (size_t i = 0; i < curve.losses.size(); ++i) {
    if (std::isfinite(curve.losses[i])) avg = 0.95 * avg + 0.05 * curve.losses[i];
    smooth[i] = avg;
  }
  polyline(smooth, "stroke=\"#c33\" stroke-width=\"2\"");
  for (size_t e = 0; e < curve.epoch_accuracy.size() && e < curve.epoch_end_steps.size(); ++e) {
    const double x = x_of(double(std::max<int64_t>(curve.epoch_end_steps[e] - 1, 0)));
    const double y = kTop + plot_h * (1 - curve.epoch_accuracy[e]);
    svg << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"4\" fill=\"#36c\"/>\n"
        << "<text x=\"" << x - 40 << "\" y=\"" << y - 8 << "\" fill=\"#36c\">acc "
        << std::round(curve.epoch_accuracy[e] * 1000) / 10 << "%</text>\n";
  }
  svg << "<text x=\"" << kLeft + plot_w + 4 << "\" y=\"" << kTop + 4
      << "\" fill=\"#36c\">100%</text>\n"
      << "<text x=\"" << kLeft + plot_w + 4 << "\" y=\"" << kTop + plot_h
      << "\" fill=\"#36c\">0%</text>\n"
      << "</svg>\n";
  write_file_atomically(file, svg.str(), "the loss curve");
}

}  // namespace mf::tools
