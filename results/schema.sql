-- results/schema.sql: the shardbench results database, version by version.
--
-- Each version is a block of statements that ends with the line
-- `PRAGMA user_version = N;`. results/db.c embeds this file at build time;
-- on open it runs, in one transaction, every block whose N is above the
-- file's user_version. A released block is never edited: a change is a new
-- block appended at the end, with SB_DB_SCHEMA_VERSION in
-- include/shardbench/results.h bumped to match (see results/README.md).
--
-- Units everywhere: times are ISO-8601 UTC text
-- ('2024-05-01T12:00:00.000Z'); durations are seconds; sizes are bytes;
-- costs are FLOP as in docs/cost-model.md. NULL means "not known".
-- Tables are created without IF NOT EXISTS on purpose: a user_version-0 file
-- that already holds tables of these names is not ours, and migrating it
-- must fail (and roll back) rather than mix with them.

-- ------------------------------------------------------------ version 1 --

-- One invocation of a tool that measures strategies (`shardbench run`, a
-- bench binary): when, where and with what it ran.
CREATE TABLE runs (
    id           INTEGER PRIMARY KEY,  -- row id
    started_at   TEXT NOT NULL          -- when the run began (UTC)
                 DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    ended_at     TEXT,                 -- when it ended; NULL if still running or it died
    host         TEXT NOT NULL,        -- host name (first host for MPI runs)
    git_commit   TEXT NOT NULL,        -- shardbench commit, sb_git_commit()
    compiler     TEXT,                 -- compiler id and version, "GNU 12.2.0"
    backend      TEXT NOT NULL,        -- "cpu", "cuda", "cuda+nccl+mpi", ...
    devices      TEXT,                 -- devices used, "4 x NVIDIA H200 (139 GiB)"
    versions     TEXT,                 -- library versions, "cuda=12.4 cudnn=9.1 nccl=2.21 mpi=4.1"
    command_line TEXT                  -- argv joined by spaces
);

-- One model graph with its parameters. A model is identified by its name
-- and parameter string; the same pair always names the same graph.
CREATE TABLE models (
    id     INTEGER PRIMARY KEY,        -- row id
    name   TEXT NOT NULL,              -- model name, "inception_v3"
    path   TEXT,                       -- file it was first read from
    params TEXT NOT NULL DEFAULT '',   -- "batch=128,classes=1024"; '' if none
    nops   INTEGER,                    -- ops in the graph
    UNIQUE (name, params)
);

-- One strategy search (`shardbench search` or bench/search): its inputs,
-- its cost, and what it took to find.
CREATE TABLE search_runs (
    id               INTEGER PRIMARY KEY,  -- row id
    run_id           INTEGER               -- the run it was part of; NULL if standalone
                     REFERENCES runs(id) ON DELETE SET NULL,
    created_at       TEXT NOT NULL         -- when it was recorded (UTC)
                     DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    source           TEXT NOT NULL,        -- "cli" or "bench"
    model_id         INTEGER NOT NULL REFERENCES models(id),  -- the model searched
    p                INTEGER NOT NULL CHECK (p >= 1),  -- device count
    algo             TEXT NOT NULL,        -- search algorithm, "pase", "bf", ...
    tflops           REAL,                 -- cost model: peak TFLOP/s per device
    gbs              REAL,                 -- cost model: link bandwidth, GB/s
    cutoff           INTEGER,              -- minimum shard size used
    total_cost       REAL,                 -- cost of the best strategy, FLOP; NULL if not finite
    seconds          REAL,                 -- wall time of the search
    nops             INTEGER,              -- ops in the graph searched
    max_configs      INTEGER,              -- most configs of any one op
    max_dep_set      INTEGER,              -- largest dependent set in the DP
    peak_table_bytes INTEGER,              -- largest DP table, bytes
    peak_rss_bytes   INTEGER,              -- peak resident memory; NULL if not measured
    strategy_json    TEXT                  -- the strategy found: per-op configs as JSON
);
CREATE INDEX search_runs_by_model ON search_runs (model_id, p, algo);
CREATE INDEX search_runs_by_run ON search_runs (run_id);

-- One strategy for a model on p devices: searched, or a baseline (data
-- parallel, one weird trick, an expert's) for comparison.
CREATE TABLE strategies (
    id                  INTEGER PRIMARY KEY,  -- row id
    model_id            INTEGER NOT NULL REFERENCES models(id),  -- the model
    p                   INTEGER NOT NULL CHECK (p >= 1),  -- device count
    kind                TEXT NOT NULL,        -- "searched", "data", "owt", "expert", ...
    predicted_cost      REAL,                 -- cost-model estimate per step, FLOP
    predicted_mem_bytes INTEGER,              -- predicted peak memory per device
    configs_json        TEXT NOT NULL,        -- per-op configs as JSON
    mesh_layout         TEXT                  -- device mesh and layouts, for people
);
CREATE INDEX strategies_by_model ON strategies (model_id, p, kind);

-- One measured attempt to train a strategy for some steps. Step times are
-- set when status is 'ok'; message says what went wrong otherwise.
CREATE TABLE measurements (
    id             INTEGER PRIMARY KEY,  -- row id
    run_id         INTEGER NOT NULL REFERENCES runs(id),        -- the run that measured it
    strategy_id    INTEGER NOT NULL REFERENCES strategies(id),  -- what was measured
    step_median_s  REAL,                 -- median step time
    step_min_s     REAL,                 -- fastest step
    step_max_s     REAL,                 -- slowest step
    steps          INTEGER NOT NULL DEFAULT 0 CHECK (steps >= 0),  -- timed steps (after warm-up)
    status         TEXT NOT NULL
                   CHECK (status IN ('ok', 'oom', 'error', 'timeout')),  -- outcome
    message        TEXT,                 -- error text for oom/error/timeout; NULL if ok
    peak_mem_bytes INTEGER               -- peak device memory, largest over devices
);
CREATE INDEX measurements_by_strategy ON measurements (strategy_id);
CREATE INDEX measurements_by_run ON measurements (run_id);

PRAGMA user_version = 1;

-- ------------------------------------------------------------ version 2 --

-- Cost-model fidelity of one bench run at one (model, p): Spearman's rank
-- correlation between the strategies' predicted cost and their measured
-- median step time, over the strategies of that run that measured 'ok' and
-- have a predicted cost (a strategy measured twice counts once, with its
-- fastest median). Written by `shardbench bench` after each (model, p);
-- rewritten when a resumed run measures more of them.
CREATE TABLE correlations (
    id          INTEGER PRIMARY KEY,  -- row id
    run_id      INTEGER NOT NULL REFERENCES runs(id),    -- the bench run
    model_id    INTEGER NOT NULL REFERENCES models(id),  -- the model
    p           INTEGER NOT NULL CHECK (p >= 1),         -- device count
    n           INTEGER NOT NULL CHECK (n >= 0),         -- strategies ranked
    rho         REAL,                 -- Spearman's rho in [-1, 1]; NULL if n < 2 or no spread
    created_at  TEXT NOT NULL         -- when it was (last) computed (UTC)
                DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (run_id, model_id, p)
);
CREATE INDEX correlations_by_model ON correlations (model_id, p);

PRAGMA user_version = 2;

-- ------------------------------------------------------------ version 3 --

-- A new measurement status, 'diverged': the training loss became NaN or
-- infinite (`shardbench run` stops at that step). SQLite cannot change a
-- CHECK constraint in place, so measurements is rebuilt with the same
-- columns, rows and indexes (no table refers to it).
CREATE TABLE measurements_v3 (
    id             INTEGER PRIMARY KEY,  -- row id
    run_id         INTEGER NOT NULL REFERENCES runs(id),        -- the run that measured it
    strategy_id    INTEGER NOT NULL REFERENCES strategies(id),  -- what was measured
    step_median_s  REAL,                 -- median step time
    step_min_s     REAL,                 -- fastest step
    step_max_s     REAL,                 -- slowest step
    steps          INTEGER NOT NULL DEFAULT 0 CHECK (steps >= 0),  -- timed steps (after warm-up)
    status         TEXT NOT NULL
                   CHECK (status IN ('ok', 'oom', 'error', 'timeout', 'diverged')),  -- outcome
    message        TEXT,                 -- error text for oom/error/timeout/diverged; NULL if ok
    peak_mem_bytes INTEGER               -- peak device memory, largest over devices
);
INSERT INTO measurements_v3 (id, run_id, strategy_id, step_median_s, step_min_s, step_max_s,
                             steps, status, message, peak_mem_bytes)
    SELECT id, run_id, strategy_id, step_median_s, step_min_s, step_max_s,
           steps, status, message, peak_mem_bytes FROM measurements;
DROP TABLE measurements;
ALTER TABLE measurements_v3 RENAME TO measurements;
CREATE INDEX measurements_by_strategy ON measurements (strategy_id);
CREATE INDEX measurements_by_run ON measurements (run_id);

PRAGMA user_version = 3;

-- ------------------------------------------------------------ version 4 --

-- The verdict of one `shardbench nightly`: its run, the run it was held to
-- (NULL: none, the first night), and how many strategies it confirmed as
-- regressions after re-measuring them. A night with regressions = 0 is a
-- good night: the next nightly's automatic baseline.
CREATE TABLE nightly_verdicts (
    run_id          INTEGER PRIMARY KEY REFERENCES runs(id),  -- the nightly's bench run
    baseline_run_id INTEGER REFERENCES runs(id),              -- what it was compared with
    regressions     INTEGER NOT NULL CHECK (regressions >= 0),  -- confirmed regressions
    improvements    INTEGER NOT NULL CHECK (improvements >= 0), -- confirmed improvements
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX nightly_verdicts_by_baseline ON nightly_verdicts (baseline_run_id);

PRAGMA user_version = 4;

-- ------------------------------------------------------------ version 5 --

-- The seconds of a fixed amount of work (`run`'s probe: 32 GEMMs of 128^3
-- on each rank, the slowest rank, median over the timed steps) measured
-- beside the launch's steps, so a comparison can divide out a machine that
-- was slower at the time (measure/regress.c). NULL: not measured (older runs).
ALTER TABLE measurements ADD COLUMN probe_s REAL;
-- The step time the cost model predicted for the strategy, in seconds:
-- its cost over F when the cost is a time (a calibration or a machine
-- file); NULL under the reference model, whose FLOP are not seconds.
ALTER TABLE measurements ADD COLUMN predicted_s REAL;

PRAGMA user_version = 5;

-- ------------------------------------------------------------ version 6 --

-- Where a nightly kept a copy of the shardbench binary it measured
-- (`nightly --keep-builds DIR`, default results/nightly-builds), so that a
-- later night measures the last good night's build launch for launch with
-- its own (A/B: the machine's slow and fast phases hit both). NULL: not kept.
ALTER TABLE nightly_verdicts ADD COLUMN build_path TEXT;

PRAGMA user_version = 6;

-- ------------------------------------------------------------ version 7 --

-- The predictive cost model's measurements (`shardbench profile`,
-- shardbench/profile.h): one profiles row per launch of it, for one
-- backend, machine (the --machine name it was measured for) and rank count,
-- with the fits of that launch: seconds per relayout that moves data and
-- per word it moves, the step's fixed part, the SGD update per element;
-- total_s tells the fastest of several launches of the same strategies.
CREATE TABLE profiles (
    id                INTEGER PRIMARY KEY,
    backend           TEXT NOT NULL,
    machine           TEXT NOT NULL,
    ranks             INTEGER NOT NULL CHECK (ranks >= 1),
    precision         TEXT NOT NULL,
    model             TEXT NOT NULL,   -- the model profiled and its sizes
    params            TEXT NOT NULL,
    strategies        INTEGER NOT NULL CHECK (strategies >= 1),
    steps             INTEGER NOT NULL CHECK (steps >= 1),
    seed              INTEGER NOT NULL,  -- the strategies' seed: launches of one seed ran the same ones
    total_s           REAL NOT NULL CHECK (total_s >= 0), -- the sum of their median steps
    relay_msg_s       REAL NOT NULL CHECK (relay_msg_s >= 0),
    relay_word_s      REAL NOT NULL CHECK (relay_word_s >= 0),
    fixed_s           REAL NOT NULL,
    update_s_per_elem REAL NOT NULL CHECK (update_s_per_elem >= 0),
    command_line      TEXT,
    created_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX profiles_by_machine ON profiles (backend, machine, ranks);
-- One op config measured: kind, local shard shape, config, signature of the
-- rest (sb_prof_sig); per step, its kernels' seconds and its own collectives'.
CREATE TABLE op_profiles (
    profile_id INTEGER NOT NULL REFERENCES profiles (id),
    kind       TEXT NOT NULL,
    shape      TEXT NOT NULL,
    config     TEXT NOT NULL,
    sig        TEXT NOT NULL,
    compute_s  REAL NOT NULL CHECK (compute_s >= 0),
    coll_s     REAL NOT NULL CHECK (coll_s >= 0),
    ref_cost   REAL NOT NULL,   -- the reference model's vertex cost, FLOP
    samples    INTEGER NOT NULL CHECK (samples >= 1),
    PRIMARY KEY (profile_id, kind, shape, config, sig)
);
-- alpha + beta * bytes of a collective over the first `grp` ranks.
CREATE TABLE coll_profiles (
    profile_id      INTEGER NOT NULL REFERENCES profiles (id),
    kind            TEXT NOT NULL,
    grp             INTEGER NOT NULL CHECK (grp >= 1),
    alpha_s         REAL NOT NULL,
    beta_s_per_byte REAL NOT NULL,
    points          INTEGER NOT NULL CHECK (points >= 1),
    PRIMARY KEY (profile_id, kind, grp)
);

PRAGMA user_version = 7;

-- ------------------------------------------------------------ version 8 --

-- The relayouts' local copy (shardbench/profile.h): seconds per word of the
-- local shards an edge copies on a rank, fitted beside relay_msg_s and
-- relay_word_s. Launches before it have 0 here: their fixed_s holds that
-- copy as a constant, as they were fitted.
ALTER TABLE profiles ADD COLUMN relay_local_s REAL NOT NULL DEFAULT 0 CHECK (relay_local_s >= 0);
-- An op config's reference cost without its collectives (FLOP): an
-- unmeasured config is estimated from a measured one by the ratio of these
-- for its kernels, and its collectives are priced by the measured
-- alpha-beta (coll_profiles). 0 before version 8: the whole ref_cost ratio.
ALTER TABLE op_profiles ADD COLUMN ref_compute REAL NOT NULL DEFAULT 0 CHECK (ref_compute >= 0);

PRAGMA user_version = 8;

-- ------------------------------------------------------------ version 9 --

-- The machine's speed during a profile launch: `run`'s probe (the same
-- fixed GEMMs, the slowest rank's, median over the launch's timed steps).
-- NULL: a launch before version 9.
ALTER TABLE profiles ADD COLUMN probe_s REAL;
-- The probe of the profile launch whose figures priced a measurement's
-- predicted_s: predicted_s x probe_s / profile_probe_s is the prediction
-- scaled to the machine's speed during the measurement (the fidelity
-- table's probe-scaled rows, beside the raw ones). NULL: not priced by
-- profiles, or by a launch before version 9.
ALTER TABLE measurements ADD COLUMN profile_probe_s REAL;

PRAGMA user_version = 9;
