"""Peak memory of the supervised chain's SVM scans alone (`joint_svm.resample_svm`, 5
scans a call as `supervised.svm_steps`, 3 calls) on N random top layers of the MNIST
model's shape (2 x 2 x 118, 10 classes): does the SVM make the supervised rule's memory
grow with its images? One process per N:

    for n in 3000 10000; do python experiments/scaling/svm_memory.py $n; done
"""
import resource
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.core.compiled import compiled
from dgdm_tf.supervised import joint_svm as J

n = int(sys.argv[1])
rng = np.random.default_rng(0)
s_top = tf.constant((rng.normal(size=(n, 2, 2, 118)) * (rng.random((n, 2, 2, 118)) < 0.6)).astype(np.float32))
y = J.targets(rng.integers(0, 10, n), 10)
mean, std = J.standardisation(s_top, scale="global")
hyper = J.SvmHyper.from_dict({"gamma": 1.0, "a_kappa": 1.0, "b_kappa": 1.0, "kappa": 0.5,
                              "bias_var": 100.0, "scale": "global", "steps": 5})
svm = J.init_svm(10, mean, std, n, hyper)
scans = compiled(lambda sv, s, yy, sd: J.resample_svm(sv, s, yy, hyper, sd))
t = time.time()
for i in range(3):
    svm = scans(svm, s_top, y, tf.constant([i, 1], tf.int64))
print(f"{n} images: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB, "
      f"{time.time() - t:.1f} s for 3 calls")
