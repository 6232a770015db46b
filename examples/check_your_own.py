import subprocess
import sys
from pathlib import Path

import numpy as np

from softrank.witnesses import Store

# Your attention matrix (here: the softmax of low-rank random logits) and your claims about it.
rng = np.random.default_rng(0)
Q, K = rng.normal(size=(32, 4)), rng.normal(size=(32, 4))
logits = Q @ K.T
A = np.exp(logits - logits.max(axis=1, keepdims=True))
A /= A.sum(axis=1, keepdims=True)

# Upper claim: the rank-k truncated SVD is within eps = 1/4 in the max-row-l1 norm.
u, s, vt = np.linalg.svd(A)
k = next(k for k in range(1, 33) if np.abs(A - (u[:, :k] * s[:k]) @ vt[:k]).sum(1).max() < 0.24)
U, V = u[:, :k] * s[:k], vt[:k]
print(f"claim: 2 <= r_eps(A) <= {k} at eps = 1/4")

if Path("my_store").exists():
    sys.exit("my_store exists already: remove it (or change the name) to run this again")
with Store.create("my_store", description="my paper's claims") as store:
    op = store.add_operator(A, family="demo", logits=logits)  # record = exact softmax(logits)
    store.add_bracket(op, "1/4",
                      upper={"kind": "factors", "rank": k, "U": U, "V": V},
                      lower={"kind": "frobenius_tail", "rank": 2})

# Recheck every claim rigorously: exit code 0 = all proved, 1 = something not proved.
# (the same as running `softrank-certify check my_store` in a shell)
done = subprocess.run([sys.executable, "-m", "softrank", "check", "my_store"])
print("exit code:", done.returncode)
