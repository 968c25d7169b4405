// SPDX-License-Identifier: Apache-2.0
// Suggestions for misspelt names (ops, attributes, env variables, CLI commands and flags): one
// edit distance and one "closest candidate" rule for every layer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace prism::text {

/// Damerau-Levenshtein distance (optimal string alignment): insertions, deletions,
/// substitutions and swaps of two neighbours cost 1 each.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate nearest to `word` within `max_distance` (the first of equals), or "".
std::string closest(std::string_view word, const std::vector<std::string>& candidates,
                    std::size_t max_distance);

}  // namespace prism::text
