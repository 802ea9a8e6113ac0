# A chart, drawn into /airlock/out/ (the runtime python-data: numpy, pandas,
# matplotlib with Agg). The files a program leaves in /airlock/out/ come
# back with its result (issue 15: files out).
#
#   bin/airlock run -r python-data examples/plot.py
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

os.makedirs("/airlock/out", exist_ok=True)
x = np.arange(1, 11)
df = pd.DataFrame({"x": x, "square": x ** 2})
df.to_csv("/airlock/out/squares.csv", index=False)
fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
ax.plot(df["x"], df["square"], marker="o")
ax.set_xlabel("x")
ax.set_ylabel("x squared")
fig.tight_layout()
fig.savefig("/airlock/out/squares.png")
with open("/airlock/out/squares.png", "rb") as f:
    png = f.read()
print("rows", len(df), "sum", int(df["square"].sum()))
print("png", png[:8] == b"\x89PNG\r\n\x1a\n", len(png) > 1000)
