#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Rewrites the quoted code blocks of docs/guide.md from their sources (the "// [NAME]" marked
parts of examples/guide/*.cpp); check_snippets.cmake (CTest guide.snippets_match_sources) fails
until this has been run after an example changes. Usage: python3 examples/guide/update_snippets.py"""
import os
import re

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def body(source, name):
    text = open(os.path.join(root, source)).read()
    marker = f"// [{name}]"
    first = text.index(marker)
    indent = first - (text.rfind("\n", 0, first) + 1)
    start = text.index("\n", first) + 1
    end = text.rfind("\n", 0, text.index(marker, start))
    lines = text[start:end].split("\n") if end >= start else []
    return "\n".join(line[indent:] if line.startswith(" " * indent) else line for line in lines)


guide = os.path.join(root, "docs", "guide.md")
doc = open(guide).read()
doc = re.sub(r"<!-- snippet: (\S+)#(\S+) -->\n```cpp\n.*?\n```",
             lambda m: f"<!-- snippet: {m.group(1)}#{m.group(2)} -->\n```cpp\n{body(m.group(1), m.group(2))}\n```",
             doc, flags=re.S)
open(guide, "w").write(doc)
