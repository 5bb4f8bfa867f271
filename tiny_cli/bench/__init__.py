"""Application: the bench — the same tasks as tiny agents and as one all-tools agent, measured.

It answers one question with numbers: does routing each task to a small card with only its
tools beat one agent that holds every tool? The parts, each a module:

- `tasks`: the task file (BenchTask, what each answer must hold, load_tasks);
- `arms`: one job run in an arm, as the routed tiny card or the all-tools generalist, in a
  scratch home whose CRM no real user shares;
- `scoring`: judging a run: right only on evidence, fabricated, wrong-tool calls, writes;
- `report`: BenchReport, each arm added up, and its JSON;
- `run`: bench_from_settings and run_bench, which fan the jobs out;
- `pages`: the loopback page server behind a task's `{site}`;
- `making`: what made a recording (options, digests, routing decisions), kept in its header;
- `gate`: `--fail-under`, a bar the report must meet;
- `bench_html`: the report as one HTML page.

The bench at scale (tool selection as the tools grow): `scale` runs it, `universe` draws the
tools each size offers, `selection` scores a first call, `scale_report` adds the runs up and
`html` draws the page with its charts.
"""

from tiny_cli.bench.arms import ARMS, Arm
from tiny_cli.bench.report import BenchReport
from tiny_cli.bench.run import BenchOptions, bench_from_settings
from tiny_cli.bench.tasks import DEFAULT_TASKS_FILE

__all__ = [
    "ARMS",
    "DEFAULT_TASKS_FILE",
    "Arm",
    "BenchOptions",
    "BenchReport",
    "bench_from_settings",
]
