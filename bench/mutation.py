"""Mutation score of the modules whose mistakes change numbers silently (``make mutation``; mutmut 3).

For each module, mutmut rewrites one line at a time (``<`` for ``<=``, ``+ 1`` for ``+ 2``, a string, a default)
and runs the module's unit tests against each mutant; a mutant the tests do not notice survived. Each module runs in
its own copy of the working tree (under ``--workdir``; every run starts afresh, since mutmut would keep earlier
outcomes when only the tests changed), with only its own tests, one module after another. Hypothesis runs derandomized (``CI=true``), so a
rerun gives the same counts.

Writes ``bench/out/mutation.json`` (per module: killed, survived, no tests, timed out, score and the surviving
mutants' names; modules not run this time keep their earlier entry) and prints a markdown table for
docs/testing.md. ``--show NAME`` prints a mutant's diff (generated in-process: no run needed). ``--check``
runs nothing: it counts each module's mutants now (mutmut's own generator, in a second) and names every module whose
count differs from the recorded one, or that was never measured (exit 1), so a score is never older than its code.

    python bench/mutation.py                      # every module (about four hours on 2 cores)
    python bench/mutation.py rearank/methods/listwise/window.py    # one module
    python bench/mutation.py --check              # which recorded scores are stale
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "mutation.json"

#: Module -> the tests that exercise it (fast tier), ranked by the risk of a silent wrong number.
MODULES: dict[str, list[str]] = {
    "rearank/methods/listwise/answer.py": ["tests/unit/test_answer.py", "tests/unit/test_answer_edges.py", "tests/unit/test_reward.py",
                          "tests/unit/test_reward_released.py"],
    "rearank/methods/listwise/reward.py": ["tests/unit/test_reward.py", "tests/unit/test_reward_released.py",
                          "tests/unit/test_reward_edges.py"],
    "rearank/methods/truth.py": ["tests/unit/test_reward.py", "tests/unit/test_reward_edges.py"],
    "rearank/methods/reasoning.py": ["tests/unit/test_answer_edges.py", "tests/unit/test_reward.py",
                                     "tests/unit/test_pointwise_method_edges.py"],
    "rearank/measures/ndcg.py": ["tests/unit/test_ndcg.py", "tests/unit/test_reward.py"],
    "rearank/measures/ir.py": ["tests/integration/test_metrics.py", "tests/unit/test_input_errors.py",
                           "tests/unit/test_metrics_edges.py"],
    "rearank/methods/listwise/window.py": ["tests/unit/test_window.py"],
    "rearank/methods/groupwise/parser.py": ["tests/unit/test_grouprank_parser.py", "tests/unit/test_grouprank_reward.py",
                                    "tests/unit/test_grouprank_edges.py"],
    "rearank/methods/groupwise/reward.py": ["tests/unit/test_grouprank_reward.py", "tests/unit/test_grouprank_edges.py"],
    "rearank/measures/answers.py": ["tests/unit/test_rag_metrics.py", "tests/unit/test_rag_metrics_edges.py"],
    "rearank/io/trec.py": ["tests/unit/test_io_formats.py", "tests/unit/test_io_files.py",
                           "tests/unit/test_io_edges.py", "tests/unit/test_runfiles.py"],
    "rearank/io/beir.py": ["tests/unit/test_io_formats.py", "tests/unit/test_packs.py", "tests/unit/test_beir_edges.py"],
    "rearank/io/qa.py": ["tests/unit/test_io_qa.py", "tests/unit/test_io_qa_edges.py", "tests/integration/test_qa_data.py"],
    "rearank/run/files.py": ["tests/unit/test_runfiles.py", "tests/unit/test_job.py", "tests/unit/test_job_edges.py"],
    "rearank/methods/listwise/method.py": ["tests/unit/test_engine_listwise.py", "tests/unit/test_engine_in_flight.py",
                                    "tests/unit/test_listwise_method_edges.py", "tests/unit/test_tdpart.py",
                                    "tests/unit/test_reasoning_switch.py", "tests/unit/test_think_budget_hits.py"],
    "rearank/methods/listwise/policies.py": ["tests/unit/test_engine_listwise.py", "tests/unit/test_engine_in_flight.py",
                                      "tests/unit/test_listwise_method_edges.py", "tests/unit/test_tdpart.py"],
    "rearank/methods/groupwise/method.py": ["tests/unit/test_grouprank_ranker.py", "tests/unit/test_groupwise_method_edges.py"],
    "rearank/methods/arena/parser.py": ["tests/unit/test_arena_reward.py", "tests/unit/test_rag_format_edges.py",
                                    "tests/unit/test_rag_eval_barrag_arena.py"],
    "rearank/methods/arena/reward.py": ["tests/unit/test_arena_reward.py", "tests/unit/test_rag_format_edges.py"],
    "rearank/methods/barrag/parser.py": ["tests/unit/test_barrag_reward.py", "tests/unit/test_rag_format_edges.py",
                                     "tests/unit/test_rag_eval_barrag_arena.py"],
    "rearank/methods/barrag/reward.py": ["tests/unit/test_barrag_reward.py", "tests/unit/test_barrag_reward_edges.py"],
    "rearank/rag/rrpo/objective.py": ["tests/unit/test_rrpo_objective.py", "tests/unit/test_rrpo_objective_edges.py"],
    "rearank/run/job.py": ["tests/unit/test_job.py", "tests/unit/test_job_edges.py", "tests/integration/test_rerank_cli.py",
                       "tests/integration/test_rerank_safety.py"],
    # where state and numbers live (issue 33): the engine, the run, the server, RAG, synthesis, export
    "rearank/engine/loop.py": ["tests/unit/test_engine_listwise.py", "tests/unit/test_engine_in_flight.py",
                               "tests/unit/test_rounds.py", "tests/unit/test_server_feed.py",
                               "tests/unit/test_engine_generate_edges.py", "tests/unit/test_engine_loop_edges.py"],
    "rearank/engine/concurrency.py": ["tests/unit/test_concurrency.py", "tests/unit/test_server_load.py",
                                      "tests/unit/test_concurrency_edges.py"],
    "rearank/engine/journal.py": ["tests/unit/test_rounds.py", "tests/unit/test_journal_edges.py"],
    "rearank/backends/ray.py": ["tests/unit/test_ray_backend_edges.py", "tests/unit/test_rounds.py"],
    "rearank/run/config.py": ["tests/unit/test_run_config.py", "tests/unit/test_job_edges.py",
                              "tests/integration/test_rerank_safety.py", "tests/unit/test_run_config_edges.py"],
    "rearank/run/stats.py": ["tests/unit/test_job.py", "tests/unit/test_job_edges.py", "tests/unit/test_engine_listwise.py",
                             "tests/unit/test_run_stats.py"],
    "rearank/server/app.py": ["tests/unit/test_server.py", "tests/unit/test_server_scores.py", "tests/unit/test_serve.py",
                              "tests/unit/test_server_app_edges.py"],
    "rearank/server/feed.py": ["tests/unit/test_server_feed.py", "tests/unit/test_server.py",
                               "tests/unit/test_server_feed_edges.py"],
    "rearank/measures/rbo.py": ["tests/unit/test_grouprank_reward.py", "tests/unit/test_rbo_edges.py"],
    "rearank/methods/groupwise/labels.py": ["tests/unit/test_grouprank_labels.py",
                                            "tests/integration/test_grouprank_labels.py"],
    "rearank/methods/pointwise/method.py": ["tests/unit/test_pointwise_method.py",
                                            "tests/unit/test_pointwise_method_edges.py"],
    "rearank/backends/scorer.py": ["tests/unit/test_scorer_edges.py"],
    "rearank/rag/evaluate.py": ["tests/unit/test_rag_evaluate.py", "tests/unit/test_rag_judge.py",
                                "tests/unit/test_rag_eval_barrag_arena.py", "tests/unit/test_rag_published.py",
                                "tests/unit/test_rag_evaluate_edges.py"],
    "rearank/rag/selectors.py": ["tests/unit/test_rag_evaluate.py", "tests/unit/test_rag_judge.py",
                                 "tests/unit/test_rag_eval_barrag_arena.py", "tests/unit/test_rag_published.py",
                                 "tests/unit/test_rag_selectors.py"],
    "rearank/rag/readers.py": ["tests/unit/test_rag_readers.py", "tests/unit/test_rag_evaluate.py",
                               "tests/unit/test_rag_readers_edges.py"],
    "rearank/backends/cache.py": ["tests/unit/test_rag_readers.py", "tests/unit/test_response_cache_edges.py"],
    "rearank/rag/rrpo/trainer.py": ["tests/unit/test_rrpo_trainer_edges.py"],
    "rearank/rag/barrag/train_filter.py": ["tests/unit/test_barrag_train_filter.py"],
    "rearank/io/files.py": ["tests/unit/test_io_files.py", "tests/unit/test_io_formats.py",
                            "tests/unit/test_input_errors.py", "tests/unit/test_io_files_edges.py"],
    "rearank/data/bm25.py": ["tests/unit/test_bm25_edges.py"],
    "data_synthesis/sampling.py": ["tests/unit/test_synthesis.py", "tests/integration/test_synth_dl21.py",
                                   "tests/unit/test_synthesis_sampling_edges.py"],
    "data_synthesis/filters.py": ["tests/unit/test_synthesis.py", "tests/unit/test_synthesis_filters_edges.py"],
    "data_synthesis/writers.py": ["tests/unit/test_synthesis.py", "tests/unit/test_synthesis_writers_edges.py"],
    "benchmark/analyses.py": ["tests/unit/test_thinking_switch.py", "tests/unit/test_benchmark_analyses.py"],
    "rearank/backends/openai.py": ["tests/unit/test_openai_backend.py", "tests/unit/test_openai_faults.py",
                                   "tests/unit/test_server_load.py", "tests/unit/test_constrain_openai.py",
                                   "tests/unit/test_openai_backend_edges.py"],
    "rearank/backends/constrain.py": ["tests/unit/test_constrain.py", "tests/unit/test_constrain_openai.py",
                                      "tests/unit/test_constrain_edges.py"],
    "recipes/checks/export.py": ["tests/unit/test_export.py", "tests/unit/test_export_edges.py"],
}
#: Top-level folders a mutated module can live in (mutmut mutates the module's own, and copies the others).
PACKAGES = ("rearank", "data_synthesis", "benchmark", "recipes")
#: mutmut's exit codes by outcome (mutmut.stats.status_by_exit_code, read here so a new mutmut cannot shift them).
KILLED, TIMEOUT = "killed", "timeout"


class MutationError(Exception):
    """A module whose mutation run could not be made (its tests fail unmutated, a test file is missing)."""


def tree_files() -> list[str]:
    """The working tree's files that git tracks or would track (no venvs, outputs or caches)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    return [name for name in listed if name and not name.startswith(("bench/out/", ".ci/")) and (ROOT / name).is_file()]


def prepare(module: str, tests: list[str], workdir: Path) -> None:
    """Refresh ``workdir`` with the working tree and a mutmut configuration for ``module`` alone."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name in tree_files():
        target = workdir / name
        if not target.is_file() or target.read_bytes() != (ROOT / name).read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, target)
    package = module.split("/")[0]
    config = {"source_paths": [package], "only_mutate": [module],
              "also_copy": [p for p in PACKAGES if p != package],
              "pytest_add_cli_args_test_selection": tests,
              "pytest_add_cli_args": ["-q", "-x", "-p", "no:cacheprovider", "-m", "not slow and not vllm"]}
    base = (ROOT / "pyproject.toml").read_text(encoding="utf-8").split("\n[tool.mutmut]")[0]
    lines = [f"{key} = {json.dumps(value)}" for key, value in config.items()]
    (workdir / "pyproject.toml").write_text(base.rstrip() + "\n\n[tool.mutmut]\n" + "\n".join(lines) + "\n",
                                            encoding="utf-8")


def run_module(module: str, tests: list[str], workdir: Path, timeout_s: int) -> dict:
    """Run mutmut on ``module``; return its counts (killed, survived, no tests, timeout, other) and survivors."""
    from mutmut.stats import status_by_exit_code

    missing = [t for t in tests if not (ROOT / t).is_file()]
    if missing:
        raise MutationError(f"{module}: test files not found: {', '.join(missing)}")
    prepare(module, tests, workdir)
    shutil.rmtree(workdir / "mutants", ignore_errors=True)  # mutmut keeps earlier outcomes even when tests changed
    data = os.environ.get("REARANK_DATA") or str(ROOT.parent / "shared" / "data")  # as tests/conftest.py finds it
    env = {**os.environ, "CI": "true", "PYTHONDONTWRITEBYTECODE": "1", "REARANK_DATA": data}
    started = time.monotonic()
    with open(workdir / "mutmut.log", "w", encoding="utf-8") as log:
        done = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", "2"], cwd=workdir, env=env,
                              stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
    meta = workdir / "mutants" / (module + ".meta")
    if done.returncode != 0 or not meta.is_file():
        tail = (workdir / "mutmut.log").read_text(encoding="utf-8", errors="replace")[-2000:]
        raise MutationError(f"{module}: mutmut failed (exit {done.returncode}); see {workdir / 'mutmut.log'}\n{tail}")
    codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
    statuses = {name: status_by_exit_code[code] for name, code in codes.items()}
    counts = Counter(statuses.values())
    total = len(statuses)
    detected = counts[KILLED] + counts[TIMEOUT]
    return {
        "tests": tests, "code": code_digest(module), "mutants": total, "killed": counts[KILLED], "timeout": counts[TIMEOUT],
        "survived": counts["survived"], "no_tests": counts["no tests"],
        "other": total - detected - counts["survived"] - counts["no tests"],
        "score": round(detected / total, 4) if total else None,
        "survivors": sorted(n for n, s in statuses.items() if s in ("survived", "no tests")),
        "seconds": round(time.monotonic() - started, 1),
    }


def code_digest(module: str) -> str:
    """A digest of ``module``'s code (its syntax tree without docstrings: comments and docs do not make a score
    stale), read in milliseconds: what the fast test compares with the recorded one."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()[:16]


def count_mutants(module: str) -> int:
    """The mutants mutmut makes of ``module`` now, generated in-process without running a test."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    return len(mutate_file_contents(module, (ROOT / module).read_text(encoding="utf-8")).mutant_names)


def stale(results: dict[str, dict], modules: list[str]) -> list[str]:
    """One line for each of ``modules`` whose recorded count is not its count now (or whose code digest, where
    recorded, is not its digest now), or that has no record."""
    lines = []
    for module in modules:
        if module not in results:
            lines.append(f"{module}: not measured; run make mutation for {module}")
            continue
        now, measured = count_mutants(module), results[module]["mutants"]
        if now != measured:
            lines.append(f"{module}: {now} mutants now, {measured} measured: re-run make mutation for {module}")
        elif results[module].get("code", code_digest(module)) != code_digest(module):
            lines.append(f"{module}: its code changed since it was measured: re-run make mutation for {module}")
    return lines


def show(name: str) -> str:
    """The diff of mutant ``name`` (as ``mutation.json`` records it) from its function, generated in-process."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    module = next((m for m in MODULES if name.startswith(m.removesuffix(".py").replace("/", ".") + ".")), None)
    if module is None:
        raise MutationError(f"{name}: not a mutant of a listed module (names start with the module's dotted path)")
    function = name.rsplit(".", 1)[1]
    code = mutate_file_contents(module, (ROOT / module).read_text(encoding="utf-8")).code
    mangled = function.rsplit("__mutmut_", 1)[0]  # x_f for f, xǁCǁm for C.m
    wanted = {function, mangled + "__mutmut_orig"}  # only these: a segment costs a pass over the whole code
    defs = {node.name: ast.get_source_segment(code, node) for node in ast.walk(ast.parse(code))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in wanted}
    original = defs.get(mangled + "__mutmut_orig")
    if function not in defs or original is None:
        raise MutationError(f"{name}: {module} has no such mutant now (see --check)")
    plain = mangled.split("ǁ")[-1] if "ǁ" in mangled else mangled.removeprefix("x_")
    before = original.replace(mangled + "__mutmut_orig", plain, 1).splitlines()
    after = defs[function].replace(function, plain, 1).splitlines()
    return "\n".join(difflib.unified_diff(before, after, module, f"{module} ({function})", lineterm="", n=1))


def table(results: dict[str, dict]) -> str:
    rows = ["| module | mutants | killed | timed out | survived | no test ran it | score |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for module, r in results.items():
        score = f"{100 * r['score']:.1f}%" if r["score"] is not None else "-"
        rows.append(f"| `{module}` | {r['mutants']} | {r['killed']} | {r['timeout']} | {r['survived']} | "
                    f"{r['no_tests']} | {score} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help=f"modules to run (default: all {len(MODULES)})")
    parser.add_argument("--workdir", type=Path, default=Path.home() / ".cache" / "rearank" / "mutation",
                        help="where the per-module copies live")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds a module may take")
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON written (merged with earlier entries)")
    parser.add_argument("--check", action="store_true", help="run nothing; name the modules (default: all) whose "
                        "recorded mutant count differs from their count now, or that were never measured")
    parser.add_argument("--show", metavar="NAME", action="append", default=[],
                        help="run nothing; print the diff of mutant NAME (a survivor's name in the JSON); repeatable")
    args = parser.parse_args(argv)
    if args.show:
        try:
            print("\n\n".join(show(name) for name in args.show))
        except MutationError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return 0
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"not a listed module: {', '.join(unknown)} (choose from {', '.join(MODULES)})")
    results = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    if args.check:
        lines = stale(results, args.modules or list(MODULES))
        print("\n".join(lines) or f"every recorded score in {args.out} matches its module's mutants now")
        return 1 if lines else 0
    failed = []
    for module in args.modules or list(MODULES):
        slug = module.removesuffix(".py").replace("/", ".")
        try:
            results[module] = run_module(module, MODULES[module], args.workdir / slug, args.timeout)
        except (MutationError, subprocess.TimeoutExpired) as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            failed.append(module)
            continue
        r = results[module]
        print(f"{module}: {r['killed'] + r['timeout']}/{r['mutants']} killed ({r['survived']} survived, "
              f"{r['no_tests']} untested) in {r['seconds']} s", flush=True)
        ordered = {m: results[m] for m in MODULES if m in results}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, args.out)
    print(table({m: results[m] for m in MODULES if m in results}))
    if failed:
        print(f"not measured (see the errors above): {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
