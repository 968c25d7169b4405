// SPDX-License-Identifier: Apache-2.0
// The tuning database schema: versioned with PRAGMA user_version, one migration per version.
#pragma once

#include <cstdint>
#include <string>

#include "tuning_db/sqlite.hpp"

namespace prism::tuning::schema {

/// The version this build writes; migrations bring older files up to it.
inline constexpr int current_version = 2;

/// Brings the open database to current_version inside one BEGIN IMMEDIATE transaction (safe
/// when several processes migrate the same new file at once: the first one does the work,
/// the others then see the new user_version). Returns the version found before migrating.
/// A file newer than current_version is left untouched (the caller opens it read-only).
/// It also stamps the file with `application_id` (done in the same transaction).
int migrate(sql::connection& conn);

/// PRAGMA application_id of every prism tuning database ("PRZM").
inline constexpr std::int64_t application_id = 0x50525a4d;

/// "" when the open file may be used as a prism tuning database: it carries prism's
/// application_id, or it is empty (no tables, user_version 0), or it is a database of an
/// earlier prism that predates application_id (user_version >= 1 and only prism's tables).
/// Otherwise why not, e.g. "it belongs to another program (application_id 0x12345678)".
/// Reads only; never changes the file.
std::string foreign_reason(sql::connection& conn);

}  // namespace prism::tuning::schema
