# py_workload.py - an allocation-heavy Python workload for bench/callgrind.sh, unwind.sh and run.sh
# (run with PYTHONMALLOC=malloc so every Python object goes through the C allocator).
# Usage: python3 py_workload.py [scale]  (default 1: 40000 rows; bench/run.sh passes a smaller scale)
import json
import sys

scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
words = ["w%d" % (i * 7919 % 5003) for i in range(int(40000 * scale))]
counts = {}
for w in words:
    counts[w] = counts.get(w, 0) + 1
rows = [{"id": i, "name": w, "tags": [w[:2], w[-2:]], "n": counts[w]} for i, w in enumerate(words)]
text = json.dumps(rows)
back = json.loads(text)
tree = None
for i in range(int(20000 * scale)):
    tree = (tree, i, str(i))
print(len(counts), len(back), len(text) % 1000)
