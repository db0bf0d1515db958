#!/usr/bin/env python3
"""Writes tools/perf/simple_input.json: perf_analyzer --input-data for the
`simple` model (INT32 INPUT0/INPUT1 [16]) with "validation_data" holding the
expected OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1, so that
perf_analyzer also checks every response it gets.

Format (perf_analyzer docs, input_data.md): each "data" entry is one batch-1
request; a tensor is either a flat list or {"content": [...], "shape": [...]}
(shape without the batch dimension)."""
import json
import pathlib

import numpy as np

rng = np.random.default_rng(2024)
data, validation = [], []
for i in range(4):
    a = rng.integers(-100, 100, size=16, dtype=np.int32)
    b = rng.integers(-100, 100, size=16, dtype=np.int32)
    if i % 2 == 0:
        data.append({"INPUT0": a.tolist(), "INPUT1": b.tolist()})
    else:
        data.append({"INPUT0": {"content": a.tolist(), "shape": [16]},
                     "INPUT1": {"content": b.tolist(), "shape": [16]}})
    validation.append({"OUTPUT0": (a + b).tolist(), "OUTPUT1": (a - b).tolist()})

out = pathlib.Path(__file__).with_name("simple_input.json")
# One request per line keeps the file readable.
text = ('{"data": [\n' + ",\n".join("  " + json.dumps(x) for x in data) +
        '\n],\n"validation_data": [\n' + ",\n".join("  " + json.dumps(x) for x in validation) + "\n]}\n")
json.loads(text)
out.write_text(text)
print(f"wrote {out}")
