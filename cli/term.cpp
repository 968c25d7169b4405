// SPDX-License-Identifier: Apache-2.0
// The `prism` command's output helpers (see term.hpp).
#include "cli/term.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "runtime/text.hpp"

namespace prism::cli {

std::size_t terminal_width(std::FILE* stream) {
  std::size_t w = 0;
  if (const char* env = std::getenv("COLUMNS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end && *end == '\0' && v > 0) w = static_cast<std::size_t>(v);
  }
  if (w == 0 && ::isatty(::fileno(stream))) {
    winsize ws{};
    if (::ioctl(::fileno(stream), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) w = ws.ws_col;
  }
  if (w == 0) w = 80;
  return std::max<std::size_t>(w, 40);
}

std::string fit(std::string_view text, std::size_t width) {
  if (text.size() <= width) return std::string(text);
  if (width <= 3) return std::string(text.substr(0, width));
  return std::string(text.substr(0, width - 3)) + "...";
}

table& table::column(std::string header, align a, bool elastic, std::size_t min_width) {
  cols_.push_back({std::move(header), a, elastic, min_width});
  return *this;
}

table& table::droppable(int rank, bool eager) {
  if (!cols_.empty()) {
    cols_.back().droppable = true;
    cols_.back().drop_rank = rank;
    cols_.back().drop_eagerly = eager;
  }
  return *this;
}

std::string wrap(std::string_view text, std::size_t width, std::size_t indent) {
  // The text's own leading spaces start the first line.
  std::size_t pos = std::min(text.find_first_not_of(' '), text.size());
  std::string out, line(pos, ' ');
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    const bool has_word = line.find_first_not_of(' ') != std::string::npos;
    if (has_word && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = std::string(indent, ' ');
    } else if (has_word) {
      line += ' ';
    }
    line += word;
  }
  return out + line + "\n";
}

table& table::row(std::vector<std::string> cells) {
  cells.resize(cols_.size());
  rows_.push_back(std::move(cells));
  return *this;
}

std::string table::render(std::size_t width) const {
  // Leave out a droppable column (lowest rank first, then rightmost): an eager one while the
  // table is wider than `width` at its natural widths, any while it cannot fit at its least.
  std::size_t natural = 0, least = 0;
  for (std::size_t c = 0; c < cols_.size(); ++c) {
    std::size_t w = cols_[c].header.size();
    for (const auto& r : rows_) w = std::max(w, r[c].size());
    natural += w + 2;
    least += (cols_[c].elastic ? std::min(w, std::max(cols_[c].min_width, cols_[c].header.size())) : w) + 2;
  }
  auto pick = [&](bool eager_only) {
    std::size_t drop = cols_.size();
    for (std::size_t c = cols_.size(); c-- > 0;)
      if (cols_[c].droppable && (!eager_only || cols_[c].drop_eagerly) &&
          (drop == cols_.size() || cols_[c].drop_rank < cols_[drop].drop_rank))
        drop = c;
    return drop;
  };
  std::size_t drop = natural > width + 2 ? pick(true) : cols_.size();
  if (drop == cols_.size() && least > width + 2) drop = pick(false);
  if (drop < cols_.size()) {
    table fewer;
    fewer.cols_ = cols_;
    fewer.cols_.erase(fewer.cols_.begin() + static_cast<std::ptrdiff_t>(drop));
    for (auto cells : rows_) {
      cells.erase(cells.begin() + static_cast<std::ptrdiff_t>(drop));
      fewer.rows_.push_back(std::move(cells));
    }
    return fewer.render(width);
  }
  const std::size_t n = cols_.size();
  if (n == 0) return {};
  std::vector<std::size_t> w(n);
  for (std::size_t c = 0; c < n; ++c) {
    w[c] = cols_[c].header.size();
    for (const auto& r : rows_) w[c] = std::max(w[c], r[c].size());
  }
  const std::size_t gaps = 2 * (n - 1);
  auto total = [&] { return std::accumulate(w.begin(), w.end(), gaps); };
  // Shorten the widest elastic column one step at a time, so elastic columns end up alike.
  while (total() > width) {
    std::size_t widest = n;
    for (std::size_t c = 0; c < n; ++c)
      if (cols_[c].elastic && w[c] > std::max(cols_[c].min_width, cols_[c].header.size()) &&
          (widest == n || w[c] > w[widest]))
        widest = c;
    if (widest == n) break;
    --w[widest];
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (std::size_t c = 0; c < n; ++c) {
      std::string cell = fit(cells[c], w[c]);
      const bool last = c + 1 == n;
      if (cols_[c].alignment == align::right) l += std::string(w[c] - cell.size(), ' ');
      l += cell;
      if (cols_[c].alignment == align::left && !last) l += std::string(w[c] - cell.size(), ' ');
      if (!last) l += "  ";
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  std::vector<std::string> header;
  for (const auto& c : cols_) header.push_back(c.header);
  line(header);
  for (const auto& r : rows_) line(r);
  return out;
}

progress_line::progress_line(std::FILE* stream) : stream_(stream), active_(::isatty(::fileno(stream))) {}

void progress_line::draw(std::size_t done, std::size_t total, std::string_view label,
                         std::string_view right) {
  if (!active_) return;
  const std::size_t width = terminal_width(stream_) - 1;  // the last column would wrap on some terminals
  const std::size_t bar = width >= 100 ? 24 : 12;
  const std::size_t filled = total ? bar * std::min(done, total) / total : bar;
  std::string text = "[" + std::string(filled, '#') + std::string(bar - filled, '.') + "] " +
                     std::to_string(done) + "/" + std::to_string(total);
  std::string tail = right.empty() ? std::string() : "  " + std::string(right);
  if (text.size() + tail.size() > width) tail.clear();
  const std::size_t room = width > text.size() + tail.size() + 2 ? width - text.size() - tail.size() - 2 : 0;
  if (room >= 8 && !label.empty()) text += "  " + fit(label, room);
  text += tail;
  // "\r" back to column 0, then "ESC [ K": erase to the end of the line (ECMA-48 EL).
  std::fprintf(stream_, "\r\033[K%s", fit(text, width).c_str());
  std::fflush(stream_);
  drawn_ = true;
}

void progress_line::clear() {
  if (!active_ || !drawn_) return;
  std::fprintf(stream_, "\r\033[K");
  std::fflush(stream_);
  drawn_ = false;
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  // A likely typo: at most a third of the longer of the two words away (at least one edit).
  std::string best;
  std::size_t best_d = 0;
  for (const auto& c : candidates) {
    const std::size_t d = text::edit_distance(word, c);
    if (d <= std::max<std::size_t>(1, std::max(word.size(), c.size()) / 3) && (best.empty() || d < best_d)) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

}  // namespace prism::cli
