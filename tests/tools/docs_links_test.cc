// Every relative link in README.md and docs/ must lead somewhere: a page moved or renamed, or a
// heading reworded, leaves a dead link that GitHub renders without complaint. The README stays a
// short front page (at most 200 lines); the user guide lives in docs/.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = MF_SOURCE_DIR;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// README.md and every .md file below docs/, in a fixed order.
std::vector<fs::path> markdown_files() {
  std::vector<fs::path> files = {kRoot / "README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin() + 1, files.end());
  return files;
}

// The lines outside fenced code blocks: a link or a '#' inside a code sample is code, not Markdown.
std::vector<std::string> prose_lines(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("```")) {
      fenced = !fenced;
    } else if (!fenced) {
      lines.push_back(line);
    }
  }
  return lines;
}

// GitHub's anchor for a heading: lowercase, characters other than letters, digits, spaces,
// hyphens and underscores dropped, spaces turned into hyphens.
std::string slug(const std::string& heading) {
  std::string out;
  for (const unsigned char c : heading) {
    if (std::isalnum(c) || c == '_' || c == '-') {
      out += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      out += '-';
    }
  }
  return out;
}

// The anchors of a Markdown text's headings; a repeated heading also gets "-1", "-2", ... as on
// GitHub.
std::set<std::string> anchors(const std::string& text) {
  static const std::regex kHeading(R"(^#{1,6}\s+(.*?)\s*#*\s*$)");
  std::set<std::string> result;
  std::map<std::string, int> seen;
  for (const std::string& line : prose_lines(text)) {
    std::smatch match;
    if (!std::regex_match(line, match, kHeading)) continue;
    const std::string base = slug(match[1]);
    const int repeat = seen[base]++;
    result.insert(repeat == 0 ? base : base + "-" + std::to_string(repeat));
  }
  return result;
}

// What is wrong with the relative links of `text`, the contents of `file`: one message per link
// whose file does not exist or whose #anchor names no heading there. `checked` counts the links.
std::vector<std::string> broken_links(const fs::path& file, const std::string& text, int& checked) {
  static const std::regex kLink(R"(\[[^\]]*\]\(([^)\s]+)\))");
  static const std::regex kCodeSpan("`[^`]*`");
  std::vector<std::string> problems;
  for (const std::string& raw : prose_lines(text)) {
    // "[x](y)" inside a code span is code, not a link.
    const std::string line = std::regex_replace(raw, kCodeSpan, "");
    for (std::sregex_iterator it(line.begin(), line.end(), kLink), end; it != end; ++it) {
      const std::string target = (*it)[1];
      if (target.starts_with("http://") || target.starts_with("https://") ||
          target.starts_with("mailto:")) {
        continue;
      }
      ++checked;
      const size_t hash = target.find('#');
      const std::string path_part = target.substr(0, hash);
      const fs::path linked = path_part.empty() ? file : file.parent_path() / path_part;
      const std::string where = file.lexically_relative(kRoot).string() + ": (" + target + ")";
      if (!fs::exists(linked)) {
        problems.push_back(where + " names a missing file");
        continue;
      }
      if (hash == std::string::npos) continue;
      const std::string anchor = target.substr(hash + 1);
      const std::string linked_text = path_part.empty() ? text : read(linked);
      if (linked.extension() != ".md" || !anchors(linked_text).contains(anchor)) {
        problems.push_back(where + " names no heading #" + anchor);
      }
    }
  }
  return problems;
}

TEST(DocsLinksTest, EveryRelativeLinkAndAnchorResolves) {
  const std::vector<fs::path> files = markdown_files();
  int checked = 0;
  for (const fs::path& file : files) {
    for (const std::string& problem : broken_links(file, read(file), checked)) {
      ADD_FAILURE() << problem;
    }
  }
  // An empty walk (a moved docs/ folder, a wrong source root) must not pass.
  EXPECT_GT(files.size(), 10u);
  EXPECT_GT(checked, 10);
}

// The checker itself can fail: a missing file and a missing heading are both reported.
TEST(DocsLinksTest, ReportsAMissingFileAndAMissingAnchor) {
  const std::string text =
      "# A `page`: here\n"
      "[ok](#a-page-here) [gone](no_such_page.md) [stale](#no-such-heading)\n"
      "```\n[in code](no_such_file.md)\n```\n"
      "[web](https://example.com/x.md)\n";
  int checked = 0;
  const auto problems = broken_links(kRoot / "README.md", text, checked);
  EXPECT_EQ(checked, 3);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("no_such_page.md"), std::string::npos);
  EXPECT_NE(problems[1].find("#no-such-heading"), std::string::npos);
}

TEST(DocsLinksTest, ReadmeIsAtMost200Lines) {
  const std::string text = read(kRoot / "README.md");
  const auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_GT(lines, 0);
  EXPECT_LE(lines, 200) << "README.md has " << lines
                        << " lines: move detail into a page under docs/";
}

}  // namespace
