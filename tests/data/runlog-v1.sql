-- The run log's FIRST schema (v1), copied when it shipped, and two runs it recorded.
-- Never edit: tests/test_runlog.py opens a database built from this file with the newest
-- code, which must upgrade it through every migration without losing a run.
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    command TEXT NOT NULL,
    label TEXT NOT NULL,
    card TEXT,
    model TEXT,
    endpoint TEXT NOT NULL,
    goal TEXT NOT NULL,
    routing TEXT,
    status TEXT NOT NULL,
    reason TEXT,
    digest TEXT,
    transcript TEXT NOT NULL,
    calls TEXT NOT NULL,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    tool_calls INTEGER NOT NULL DEFAULT 0,
    ghost_calls INTEGER NOT NULL DEFAULT 0,
    recovered_calls INTEGER NOT NULL DEFAULT 0,
    caller_tokens INTEGER NOT NULL DEFAULT 0,
    wall_seconds REAL,
    tool_mode TEXT,
    pid INTEGER NOT NULL
);
PRAGMA user_version = 1;

-- a finished run whose answer needed one repair
INSERT INTO runs VALUES (
    1, '2025-03-01T09:00:00.000+00:00', '2025-03-01T09:00:02.500+00:00', 'invoke', 'invoke',
    'docs-finder', 'qwen2.5:7b-instruct', '127.0.0.1', 'how does onboarding work', NULL,
    'ok', NULL,
    '{"agent_id": "docs-finder", "status": "ok", "summary": "Two weeks, with a buddy."}',
    '[{"role": "system", "content": "You are docs-finder."},'
    || ' {"role": "user", "content": "Task: how does onboarding work"},'
    || ' {"role": "assistant", "content": "Two weeks."},'
    || ' {"role": "user", "content": "Your answer cannot be used: no JSON object found."},'
    || ' {"role": "assistant", "content": "{\"status\": \"ok\", \"summary\": \"Two weeks.\"}"}]',
    '[]', 820, 64, 1, 0, 0, 24, 2.5, 'auto', 4242
);

-- a run whose process died (its pid is beyond any pid_max): still `running`
INSERT INTO runs VALUES (
    2, '2025-03-01T09:05:00.000+00:00', NULL, 'bench', 'onboarding/tiny/0',
    'docs-finder', 'qwen2.5:7b-instruct', '127.0.0.1', 'how does onboarding work', NULL,
    'running', NULL, NULL, '[{"role": "system", "content": "You are docs-finder."}]',
    '[]', 0, 0, 0, 0, 0, 0, NULL, 'native', 999999999
);
