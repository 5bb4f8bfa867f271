"""Application: the bench — the same tasks as tiny agents and as one all-tools agent, measured.

It answers one question with numbers: does routing each task to a small card with only its
tools beat one agent that holds every tool? The parts, each a module:

- `tasks`: the task file (BenchTask, what each answer must hold, load_tasks);
- `arms`: one job run in an arm, as the routed tiny card or the all-tools generalist, in a
  scratch home whose CRM no real user shares;
- `scoring`: judging a run: right only on evidence, fabricated, wrong-tool calls, writes;
- `report`: BenchReport, each arm added up, and its JSON;
- `run`: bench_from_settings and run_bench, which fan the jobs out;
- `pages`: the loopback page server behind a task's `{site}`.
"""

from tiny_cli.bench.arms import ARMS, Arm, PromptSplit, RouterLike, generalist
from tiny_cli.bench.report import ArmSummary, BenchReport, summarize
from tiny_cli.bench.run import BenchOptions, Progress, bench_from_settings, run_bench
from tiny_cli.bench.scoring import EVIDENCE, Evidence, RunResult, judge
from tiny_cli.bench.tasks import (
    DEFAULT_TASKS_FILE,
    BenchTask,
    Expect,
    check_agents,
    default_tasks_path,
    load_tasks,
    pages_folder,
)

__all__ = [
    "ARMS",
    "DEFAULT_TASKS_FILE",
    "EVIDENCE",
    "Arm",
    "ArmSummary",
    "BenchOptions",
    "BenchReport",
    "BenchTask",
    "Evidence",
    "Expect",
    "Progress",
    "PromptSplit",
    "RouterLike",
    "RunResult",
    "bench_from_settings",
    "check_agents",
    "default_tasks_path",
    "generalist",
    "judge",
    "load_tasks",
    "pages_folder",
    "run_bench",
    "summarize",
]
