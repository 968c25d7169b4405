// SPDX-License-Identifier: Apache-2.0
// Output helpers of the `prism` command: exit codes, the terminal width, tables that fit it,
// a one-line progress bar, and "did you mean" suggestions. The only place the CLI writes
// terminal control sequences.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace prism::cli {

/// Exit codes of every `prism` command (docs/cli.md).
enum exit_code : int {
  exit_ok = 0,             ///< done
  exit_runtime_error = 1,  ///< the command could not do its work (device, file, database, OpenCL)
  exit_usage = 2,          ///< bad command line: unknown command or flag, bad or missing value
  exit_check_failed = 3,   ///< it ran, and a result failed its correctness check
};

/// Columns available on `stream`: $COLUMNS when set to a number, else the terminal's width,
/// else 80 (not a terminal: pipes, files, CI). Never less than 40.
std::size_t terminal_width(std::FILE* stream = stdout);

/// A text table whose lines fit a width: columns keep their natural width while they fit; past
/// that, columns marked droppable are left out (see droppable()) and the columns marked elastic
/// are shortened (their cells end in "...") until they do.
class table {
 public:
  enum class align { left, right };
  /// Adds a column; `elastic` columns give up width first, `min_width` is the least they keep.
  table& column(std::string header, align a = align::left, bool elastic = false, std::size_t min_width = 8);
  /// Marks the last column added as one to leave out, lowest `rank` first (among equal ranks the
  /// rightmost). `eager` columns go as soon as the table is wider than the width at its natural
  /// widths (a missing column reads better than cut values); the others only when the table
  /// cannot fit even with its elastic columns at their least widths.
  table& droppable(int rank = 0, bool eager = false);
  /// Adds a row (one cell per column; missing cells are empty).
  table& row(std::vector<std::string> cells);
  std::size_t rows() const noexcept { return rows_.size(); }
  /// The table, lines ending in '\n', none longer than `width` (unless the fixed columns alone
  /// are wider).
  std::string render(std::size_t width) const;

 private:
  struct col {
    std::string header;
    align alignment;
    bool elastic;
    std::size_t min_width;
    bool droppable = false;
    int drop_rank = 0;
    bool drop_eagerly = false;
  };
  std::vector<col> cols_;
  std::vector<std::vector<std::string>> rows_;
};

/// `text` cut to `width` columns, ending in "..." when cut.
std::string fit(std::string_view text, std::size_t width);
/// `text` broken into lines of at most `width` columns at spaces; lines after the first start
/// with `indent` spaces. Ends in '\n'.
std::string wrap(std::string_view text, std::size_t width, std::size_t indent = 0);

/// A progress bar redrawn in place on a terminal ("[####....] 3/10  label"), fitted to the
/// terminal's width; on anything else, nothing (callers print lines instead).
class progress_line {
 public:
  explicit progress_line(std::FILE* stream = stderr);
  bool active() const noexcept { return active_; }
  void draw(std::size_t done, std::size_t total, std::string_view label, std::string_view right = {});
  /// Clears the bar (before a normal line, and at the end).
  void clear();

 private:
  std::FILE* stream_;
  bool active_;
  bool drawn_ = false;
};

/// Levenshtein distance (for suggestions).
/// The candidate closest to `word` when it is close enough to be a likely typo (distance at most
/// a third of the longer word, at least 1; a swap of two letters counts once); "" otherwise.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace prism::cli
