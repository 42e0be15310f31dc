# py_workload.py - an allocation-heavy Python workload for bench/callgrind.sh (run with
# PYTHONMALLOC=malloc so every Python object goes through the C allocator).
import json

words = ["w%d" % (i * 7919 % 5003) for i in range(40000)]
counts = {}
for w in words:
    counts[w] = counts.get(w, 0) + 1
rows = [{"id": i, "name": w, "tags": [w[:2], w[-2:]], "n": counts[w]} for i, w in enumerate(words)]
text = json.dumps(rows)
back = json.loads(text)
tree = None
for i in range(20000):
    tree = (tree, i, str(i))
print(len(counts), len(back), len(text) % 1000)
