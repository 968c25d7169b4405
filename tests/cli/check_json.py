#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Validates a JSON document (stdin) against a schema of tests/cli/schemas; exit 1 naming the
first problems. Usage: check_json.py SCHEMA_FILE [LABEL] < document"""
import json
import sys

import jsonschema


def main() -> int:
    schema_file = sys.argv[1]
    label = sys.argv[2] if len(sys.argv) > 2 else schema_file
    text = sys.stdin.read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        print(f"{label}: not JSON ({e}); output began: {text[:200]!r}")
        return 1
    with open(schema_file, encoding="utf-8") as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:5]:
        where = "/".join(str(p) for p in e.path) or "(top)"
        print(f"{label}: at {where}: {e.message}")
    if errors:
        return 1
    print(f"{label}: valid against {schema_file.rsplit('/', 1)[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
