"""`snakemake --lint` passes apart from the conda / container lint (.ci/lint.py, also run
by .ci/run), and the check itself catches any other lint."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("ci_lint", REPO / ".ci" / "lint.py")
ci_lint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci_lint)

# what `snakemake --lint` printed before the helpers left the rule files (abridged)
TEXT = """\
Lints for snakefile /repo/workflow/rules/data.smk:
    * Mixed rules and functions in same snakefile.:
      Small one-liner functions used only once should be defined as lambda
      expressions. Other functions should be collected in a common module, e.g.
      'rules/common.smk'. This makes the workflow steps more readable.
      Also see:
      https://snakemake.readthedocs.io/en/latest/snakefiles/modularization.html#includes

Lints for rule download (line 12, /repo/workflow/rules/data.smk):
    * Specify a conda environment or container for each rule.:
      This way, the used software for each specific step is documented, and the
      workflow can be executed on any machine without prerequisites.
      Also see:
      https://snakemake.readthedocs.io/en/latest/snakefiles/deployment.html#integrated-package-management

"""


def test_workflow_lints_clean_but_for_the_environment_lint():
    r = subprocess.run([sys.executable, str(REPO / ".ci" / "lint.py")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "snakemake --lint:" in r.stdout


def test_the_check_fails_on_any_other_lint():
    lints, problems = ci_lint.check(1, "", TEXT)
    assert lints == [
        ("snakefile /repo/workflow/rules/data.smk", "Mixed rules and functions in same snakefile."),
        ("rule download (line 12, /repo/workflow/rules/data.smk)", ci_lint.ALLOWED),
    ]
    assert problems == ["snakefile /repo/workflow/rules/data.smk: "
                        "Mixed rules and functions in same snakefile."]
    env_only = TEXT[TEXT.index("Lints for rule"):]
    assert ci_lint.check(1, "", env_only)[1] == []


def test_the_check_reads_json_and_refuses_silence():
    js = ('{"snakefiles": [], "rules": [{"for": {"rule": "download"}, "lints": '
          '[{"title": "No log directive defined", "body": "", "links": []}]}]}')
    lints, problems = ci_lint.check(1, js, "")
    assert lints == [('{"rule": "download"}', "No log directive defined")]
    assert len(problems) == 1 and "No log directive defined" in problems[0]
    # a workflow that does not parse prints no lints: that fails too
    assert ci_lint.check(1, "", "SyntaxError in file Snakefile, line 3")[1]
    assert ci_lint.check(0, "", "")[1]
    assert ci_lint.check(0, "", "Congratulations, your workflow is in a good condition!")[1] == []
