"""The supervised model against the unsupervised model + a separate SVM on the labelled
toy data of ``tests/test_supervised_against_unsupervised.py`` (class = which top map is on), over
several chain seeds: one seed's difference is a noisy draw, so this prints its spread.

    python experiments/supervised/toy_vs_unsupervised.py 2 4 6 8 10

One line per seed (the seed of both pipelines' training chains; the test averages 2, 4, 6).
"""
import sys

import numpy as np

sys.path.insert(0, "tests")
from test_supervised_against_unsupervised import supervised_against_unsupervised  # noqa: E402

rows = []
for seed in [int(s) for s in sys.argv[1:]] or [2]:
    rows.append(supervised_against_unsupervised(seed))
    print(f"seed {seed}: supervised {rows[-1][0]:.1f}%, unsupervised + SVM {rows[-1][1]:.1f}%",
          flush=True)
s, u = np.array(rows).T
print(f"mean over {len(rows)} seeds: supervised {s.mean():.1f}%, unsupervised + SVM {u.mean():.1f}%")
