// The tuning database schema: versioned with PRAGMA user_version, one migration per version.
#pragma once

#include "tuning_db/sqlite.hpp"

namespace prism::tuning::schema {

/// The version this build writes; migrations bring older files up to it.
inline constexpr int current_version = 2;

/// Brings the open database to current_version inside one BEGIN IMMEDIATE transaction (safe
/// when several processes migrate the same new file at once: the first one does the work,
/// the others then see the new user_version). Returns the version found before migrating.
/// A file newer than current_version is left untouched (the caller opens it read-only).
int migrate(sql::connection& conn);

}  // namespace prism::tuning::schema
