"""Trace loaders: every format's fixture mapped row by row, skip reports, and clear errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from impactlab import TraceError, load_trace
from impactlab.inputs.traces import FORMATS, detect_format, load, projects_from_users
from impactlab.inputs.traces.alibaba import JOB_COLUMNS, TASK_COLUMNS

FIXTURES = Path(__file__).parent / "fixtures"
COLS = ["job_id", "submit_s", "user", "project", "gpus", "duration_s", "kind"]

#: fixture -> (format, expected rows of COLS, expected skip reasons)
EXPECTED = {
    "philly_derived.csv": (
        "philly",
        [
            ("philly-2", 0, "unknown", "ee9e8c", 8, 74, "eval"),
            ("philly-3", 51, "unknown", "ee9e8c", 8, 204342, "training"),
            ("philly-6", 501, "unknown", "2f3a1b", 1, 1200, "eval"),
            ("philly-7", 701, "unknown", "b436b2", 64, 90000, "pretrain"),
        ],
        {"no GPUs (CPU-only job)": 1, "zero runtime (never ran)": 1},
    ),
    "philly_cluster_job_log.json": (
        "philly-json",
        [
            # two attempts: 74 s + 2 d 5 h 39 min 42 s
            ("application_1506638472019_14199", 0, "ce2f4c", "ee9e8c", 8, 74 + 193182, "training"),
            ("application_1506638472019_14201", 1041, "a1b2c3", "2f3a1b", 1, 300, "debug"),
            ("application_1506638472019_14202", 2301, "d4e5f6", "b436b2", 16, 43200, "training"),
        ],
        {
            "never started (no attempts)": 1,
            "unfinished (running at the snapshot)": 1,
            "attempt without start or end time (logging error)": 1,
        },
    ),
    "helios_cluster_log.csv": (
        "helios",
        [
            ("1425511", 0, "uXBbc", "vcJkd", 1, 36848, "other"),
            ("1425512", 26, "uVMrF", "vchbv", 4, 249, "debug"),
            ("1425513", 27, "uzqls", "vcpDC", 1, 675233, "other"),
            ("1425515", 539, "uXBbc", "vcJkd", 16, 43200, "training"),
            ("1425517", 1739, "uVMrF", "vchbv", 2, 1200, "debug"),
        ],
        {"unfinished or unknown state RUNNING": 1, "never started": 1, "no GPUs (CPU-only job)": 1},
    ),
    "acme_trace_seren.csv": (
        "acme",
        [
            ("5778432", 0, "u5907", None, 8, 117, "other"),
            ("5778469", 336, "u5907", None, 8, 2693, "other"),
            ("5778500", 2498, "u1234", None, 256, 172800, "pretrain"),
            ("5778501", 6098, "u2222", None, 1, 300, "eval"),
            ("5778503", 9698, "u3333", None, 16, 21600, "training"),  # SFT
            ("5778504", 13298, "u3333", None, 4, 7200, "training"),  # MLLM
            ("5778505", 16898, "u5907", None, 1, 60, "debug"),  # +00:00 zone: 01:00 +08:00
            ("5778506", 20498, "u1234", None, 8, 3600, "other"),  # unknown type Rollout
        ],
        {"no GPUs (CPU-only job)": 1},
    ),
    "acme_trace_kalos.csv": (
        "acme",
        [
            ("dlctk696s0jbvitv", 0, "uf794", None, 64, 8, "other"),
            ("dlc1t2ypl09b8qtp", 1664, "uf794", None, 64, 70, "other"),
            ("dlc9pretrain0001", 3542, "u0a11", None, 1024, 259200, "pretrain"),
            ("dlc9eval00000001", 7142, "u0a11", None, 1, 600, "eval"),
        ],
        {"unfinished or unknown state PENDING": 1},
    ),
    "pai2020": (
        "pai2020",
        [
            ("a4b9c6a81f5b9a7d1ae8b7e1", 0, "58540f191766", None, 1, 520, "eval"),  # 50% GPU -> 1
            (
                "4f057009a5d481acec67b088",
                21,
                "58540f191766",
                None,
                2,
                9045,
                "other",
            ),  # ps 0 + 2 x 100%
            ("b1c2d3e4f5a6b7c8d9e0f1a2", 121, "9d8c7b6a5f4e", None, 8, 80, "debug"),
        ],
        {
            "unfinished or unknown status Running": 1,
            "no task rows for the job": 1,
            "no GPUs (CPU-only job)": 1,
        },
    ),
    "spot_job_info_df.csv": (
        "spot2026",
        [
            ("239255", 0, "org13", "org13", 1, 2764799, "other"),
            ("253689", 0, "org13", "org13", 1, 15897599, "other"),
            ("437260", 9589663, "org57", "", 16, 41060, "training"),
            ("437261", 9589663, "org57", "", 94, 71718, "pretrain"),
            ("437262", 9590000, "org57", "", 2, 600, "eval"),  # 0.5 GPU x 2 workers -> 1 x 2
        ],
        {"no GPUs (CPU-only job)": 1},
    ),
    "sacct_parsable2.txt": (
        "slurm",
        [
            ("1001", 0, "alice", "nlp", 8, 43200, "training"),
            ("1002", 1800, "bob", "vision", 1, 14400, "interactive"),  # bash; typed gres/gpu:a100=1
            ("1003_1", 3600, "carol", "nlp", 2, 600, "eval"),
            ("1003_2", 3600, "carol", "nlp", 1, 180, "debug"),  # Elapsed MM:SS, FAILED
            ("1008", 12600, "erin", "nlp", 64, 180000, "pretrain"),  # Elapsed 2-02:00:00
        ],
        {
            "job step (not a job)": 2,
            "unfinished or unknown state PENDING": 1,
            "unfinished or unknown state RUNNING": 1,
            "never started": 1,
            "no GPUs (CPU-only job)": 1,
        },
    ),
    "generic_trace.csv": (
        "generic",
        [
            ("j1", 0, "ann", "p1", 1, 600, "debug"),
            ("j2", 30.5, "bob", "", 8, 36000, "training"),
            ("j4", 90, "cy", "p2", 64, 259200, "pretrain"),
        ],
        {"no GPUs (CPU-only job)": 1},
    ),
}


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error(path: Path, **kwargs) -> TraceError:
    with pytest.raises(TraceError) as info:
        load_trace(path, **kwargs)
    return info.value


# ----- every format, row by row -------------------------------------------------------------
@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_fixture_maps_row_by_row(fixture):
    fmt, rows, skipped = EXPECTED[fixture]
    trace = load_trace(FIXTURES / fixture)
    report = trace.attrs["load_report"]
    assert report["format"] == fmt and report["skipped"] == skipped
    assert report["rows"] == report["jobs"] + sum(
        report["skipped"].values()
    )  # nothing dropped silently
    got = list(trace[COLS].itertuples(index=False, name=None))
    assert len(got) == len(rows)
    for have, want in zip(got, rows):
        if want[3] is None:  # derived project: checked in its own test
            have, want = have[:3] + have[4:], want[:3] + want[4:]
        assert have == want


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_format_is_detected_from_the_columns(fixture):
    assert detect_format(FIXTURES / fixture) == EXPECTED[fixture][0]
    assert EXPECTED[fixture][0] in FORMATS


def test_pai_loads_from_either_table_and_reads_a_header_after_a_bom(tmp_path):
    """Either released table names the pair; a table saved with a BOM and a header (as a
    spreadsheet writes it) keeps its header out of the data."""
    folder = FIXTURES / "pai2020"
    whole = load_trace(folder)
    for table in ("pai_job_table.csv", "pai_task_table.csv"):
        assert load_trace(folder / table).equals(whole)
    copy = tmp_path / "pai2020"
    copy.mkdir()
    for name, columns in (("pai_job_table.csv", JOB_COLUMNS), ("pai_task_table.csv", TASK_COLUMNS)):
        text = (folder / name).read_text()
        (copy / name).write_text("\ufeff" + ",".join(columns) + "\n" + text)
    assert load_trace(copy).equals(whole)


def test_inferred_kinds_are_marked_and_recorded_kinds_are_not():
    helios = load_trace(FIXTURES / "helios_cluster_log.csv")
    assert helios["kind_inferred"].all() and "kind" in helios.attrs["load_report"]["inferred"]
    acme = load_trace(FIXTURES / "acme_trace_seren.csv")
    assert not acme["kind_inferred"].any() and "kind" not in acme.attrs["load_report"]["inferred"]
    slurm = load_trace(FIXTURES / "sacct_parsable2.txt").set_index("job_id")
    assert not slurm.loc["1002", "kind_inferred"] and slurm.loc["1001", "kind_inferred"]


def test_states_and_source_labels_are_kept_as_extra_columns():
    helios = load_trace(FIXTURES / "helios_cluster_log.csv")
    assert list(helios["state"]) == ["COMPLETED", "FAILED", "CANCELLED", "COMPLETED", "TIMEOUT"]
    slurm = load_trace(FIXTURES / "sacct_parsable2.txt")
    assert slurm.set_index("job_id").loc["1002", "state"] == "CANCELLED"  # "CANCELLED by 1002"
    acme = load_trace(FIXTURES / "acme_trace_seren.csv")
    assert acme["type"].iloc[-1] == "Rollout"
    assert any("Rollout" in n for n in acme.attrs["load_report"]["notes"])


def test_spot_jobs_run_unallocated_and_preemptible():
    trace = load_trace(FIXTURES / "spot_job_info_df.csv").set_index("job_id")
    assert list(trace["preemptible"]) == [False, False, True, True, True]
    assert list(trace["priority"]) == [1, 1, 0, 0, 0]
    assert trace.loc["437262", "organization"] == "org57"
    assert any("rounded up" in n for n in trace.attrs["load_report"]["notes"])


def test_acme_projects_come_from_users_by_a_seeded_rule():
    one = load_trace(FIXTURES / "acme_trace_seren.csv", users_per_project=1)
    again = load_trace(FIXTURES / "acme_trace_seren.csv", users_per_project=1)
    assert list(one["project"]) == list(again["project"])
    assert one.groupby("user")["project"].nunique().max() == 1  # a user stays in one project
    assert one["project"].nunique() == 4  # 4 users, one per project
    assert "project" in one.attrs["load_report"]["inferred"]


def test_projects_from_users_is_seeded_and_balanced():
    users = pd.Series([f"u{i}" for i in range(12)] * 2)
    a = projects_from_users(users, seed=1, users_per_project=4)
    assert a.equals(projects_from_users(users, seed=1, users_per_project=4))
    assert sorted(a.unique()) == ["proj00", "proj01", "proj02"]
    assert a.iloc[:12].value_counts().tolist() == [4, 4, 4]


def test_generic_parquet_round_trips(tmp_path):
    trace = load_trace(FIXTURES / "generic_trace.csv")
    trace.attrs = {}
    trace.to_parquet(tmp_path / "t.parquet")
    again = load_trace(tmp_path / "t.parquet")
    assert again.attrs["load_report"]["format"] == "generic"
    pd.testing.assert_frame_equal(again[COLS], trace[COLS])


def test_generic_defaults_and_extra_columns():
    trace = load_trace(FIXTURES / "generic_trace.csv").set_index("job_id")
    assert math.isinf(trace.loc["j1", "checkpoint_s"]) and math.isinf(trace.loc["j1", "patience_s"])
    assert not trace.loc["j4", "preemptible"]  # "no"
    assert trace.loc["j2", "team"] == "blue"


def test_sniffed_delimiter_reads_semicolons(tmp_path):
    path = write(tmp_path, "job_id;submit_s;gpus;duration_s\na;0;1;5\n")
    assert list(load_trace(path)["job_id"]) == ["a"]


def test_philly_csv_accepts_datetimes(tmp_path):
    path = write(
        tmp_path,
        "timestamp,duration,num_gpus,cluster\n2017-10-07 01:00:00,60,1,a\n"
        "2017-10-07 01:01:00,60,2,b\n",
    )
    assert list(load_trace(path)["submit_s"]) == [0.0, 60.0]


# ----- errors name the file, row and column ---------------------------------------------------
def test_empty_file(tmp_path):
    err = error(write(tmp_path, ""))
    assert "empty" in str(err) and str(tmp_path) in str(err)


def test_header_without_rows(tmp_path):
    assert "no rows" in str(
        error(write(tmp_path, "job_id,submit_s,gpus,duration_s\n"), format="generic")
    )


def test_a_row_with_a_field_left_out_is_an_error_naming_its_line_and_column(tmp_path):
    text = "job_id,submit_s,gpus,duration_s,team\na,0,1,5,red\nb,1,1,5,\nc,2,1\n"
    err = error(write(tmp_path, text))  # (b leaves its team empty: that is fine)
    assert (err.row, err.column) == (4, "duration_s") and "3 fields" in err.problem


def test_wrong_delimiter_in_a_row(tmp_path):
    err = error(write(tmp_path, "job_id,submit_s,gpus,duration_s\na,0,1,5\nb;1;1;5\n"))
    assert err.row == 3 and "';'" in err.problem


@pytest.mark.parametrize(
    "fixture, column",
    [
        ("helios_cluster_log.csv", "vc"),
        ("sacct_parsable2.txt", "AllocTRES"),
        ("acme_trace_seren.csv", "type"),
        ("spot_job_info_df.csv", "job_type"),
    ],
)
def test_missing_column(tmp_path, fixture, column):
    frame = pd.read_csv(FIXTURES / fixture, sep=None, engine="python", dtype=str)
    path = tmp_path / fixture
    frame.drop(columns=column).to_csv(path, index=False, sep="|" if "sacct" in fixture else ",")
    err = error(path, format=EXPECTED[fixture][0])
    assert err.column == column and "missing" in err.problem


def test_mixed_time_zones(tmp_path):
    text = (
        (FIXTURES / "acme_trace_seren.csv")
        .read_text()
        .replace("2023-03-01 02:00:00+08:00", "2023-03-01 02:00:00")
    )
    err = error(write(tmp_path, text))
    assert (err.row, err.column) == (5, "submit_time") and "zone" in err.problem


def test_duplicate_ids(tmp_path):
    text = (FIXTURES / "helios_cluster_log.csv").read_text().replace("1425512,", "1425511,")
    err = error(write(tmp_path, text))
    assert (err.row, err.column) == (3, "job_id") and "duplicate" in err.problem


def test_negative_duration(tmp_path):
    text = (
        (FIXTURES / "helios_cluster_log.csv")
        .read_text()
        .replace(
            "2020-06-09 18:41:27,2020-06-09 18:45:36", "2020-06-09 18:45:36,2020-06-09 18:41:27"
        )
    )
    err = error(write(tmp_path, text))
    assert (err.row, err.column) == (3, "end_time") and "before it starts" in err.problem
    err = error(write(tmp_path, "timestamp,duration,num_gpus,cluster\n0,10,1,a\n5,-3,1,a\n"))
    assert (err.row, err.column) == (3, "duration_s") and "negative" in err.problem


def test_absurd_duration(tmp_path):
    err = error(write(tmp_path, "timestamp,duration,num_gpus,cluster\n0,10,1,a\n5,1e12,1,a\n"))
    assert err.row == 3 and "absurd" in err.problem
    assert len(load_trace(tmp_path / "trace.csv", max_duration_s=1e13)) == 2


def test_job_larger_than_the_target_cluster(tmp_path):
    err = error(FIXTURES / "sacct_parsable2.txt", max_gpus=32)
    assert (err.row, err.column) == (12, "gpus") and "larger" in err.problem
    assert err.problem.endswith("(got 64)")  # (GPUs summed from TRES: a count, not "64.0")
    trace = load_trace(FIXTURES / "sacct_parsable2.txt", max_gpus=32, oversize="skip")
    assert (
        trace.attrs["load_report"]["skipped"]["job larger than the target cluster (32 GPUs)"] == 1
    )
    err = error(FIXTURES / "generic_trace.csv", max_gpus=16)
    assert (err.row, err.column) == (5, "gpus")


def test_unparseable_time_is_an_error_or_a_reported_skip(tmp_path):
    text = (
        (FIXTURES / "helios_cluster_log.csv")
        .read_text()
        .replace("2020-06-09 18:41:28,2020", "yesterday,2020")
    )
    err = error(write(tmp_path, text))
    assert (err.row, err.column) == (4, "submit_time") and "not a time" in err.problem
    trace = load_trace(tmp_path / "trace.csv", on_bad="skip")
    assert trace.attrs["load_report"]["skipped"]["not a time (submit_time)"] == 1


def test_a_skipped_slurm_elapsed_is_counted_once_and_its_row_left_out(tmp_path):
    """A bad Elapsed under on_bad="skip" was counted as skipped and loaded all the same (the
    frame was read before the check dropped the row)."""
    text = (FIXTURES / "sacct_parsable2.txt").read_text().replace("|04:00:00|", "|INVALID|")
    path = write(tmp_path, text, "sacct.txt")
    assert error(path).column == "Elapsed"
    trace = load_trace(path, on_bad="skip")
    report = trace.attrs["load_report"]
    assert report["skipped"]["not a [D-]HH:MM:SS duration (Elapsed)"] == 1
    assert "1002" not in set(trace["job_id"])
    assert report["rows"] == report["jobs"] + sum(report["skipped"].values())


def test_lines_ended_by_cr_alone_read_as_lines(tmp_path):
    """A file whose lines end with CR alone was read as one line (a header with repeated or
    odd column names)."""
    text = (FIXTURES / "generic_trace.csv").read_text()
    path = tmp_path / "mac.csv"
    path.write_bytes(text.replace("\n", "\r").encode())
    assert load_trace(path).equals(load_trace(FIXTURES / "generic_trace.csv"))


def test_sacct_parsable_with_a_separator_ending_every_line_reads_as_parsable2(tmp_path):
    """``sacct --parsable`` ends every line with '|' (an empty last column, once refused as a
    header with an empty column name); ``--parsable2`` does not."""
    two = FIXTURES / "sacct_parsable2.txt"
    text = "".join(line + "|\n" for line in two.read_text().splitlines())
    assert load_trace(write(tmp_path, text, "sacct.txt")).equals(load_trace(two))
    ragged = text.replace("|COMPLETED|\n", "|COMPLETED\n", 1)  # (not every line: no guess)
    assert "empty column name" in str(error(write(tmp_path, ragged, "ragged.txt")))


def test_slurm_duration_is_elapsed_before_end_minus_start(tmp_path):
    """Elapsed is the run time: it leaves out time suspended, and a run across the autumn
    clock change (End's wall clock before Start's) is still its Elapsed, not an error. End -
    Start stands in where Elapsed is blank."""
    head = "JobID|User|Account|Submit|Start|End|Elapsed|AllocTRES|State\n"
    run = "|ann|olmo|2024-11-03T01:20:00|2024-11-03T{}|2024-11-03T{}|{}|gres/gpu=1|COMPLETED\n"
    runs = [
        ("10:00:00", "12:00:00", "01:00:00"),  # suspended an hour
        ("01:30:00", "01:10:00", "00:40:00"),  # across the clock change
        ("10:00:00", "12:00:00", ""),  # no Elapsed
    ]
    text = head + "".join(f"{k}{run.format(*cells)}" for k, cells in enumerate(runs))
    trace = load_trace(write(tmp_path, text, "sacct.txt")).set_index("job_id")
    assert trace["duration_s"].to_dict() == {"0": 3600.0, "1": 2400.0, "2": 7200.0}
    blank_and_reversed = head + "9" + run.format("01:30:00", "01:10:00", "")
    err = error(write(tmp_path, blank_and_reversed, "bad.txt"))
    assert (err.row, err.column) == (2, "End") and "ends before it starts" in str(err)


def test_slurm_gpus_come_from_alloc_gres_where_alloc_tres_has_none(tmp_path):
    """A Slurm that does not account GPUs as TRES records them only in AllocGRES: ``gpu:N`` or
    ``gpu:TYPE:N`` entries, summed, an index list after one ignored; a dump may hold AllocGRES
    alone."""
    head = "JobID|User|Account|Submit|Start|End|Elapsed|AllocTRES|AllocGRES|State\n"
    run = "|ann|olmo|2024-11-03T01:00:00|2024-11-03T02:00:00|2024-11-03T03:00:00|01:00:00|{}|{}|COMPLETED\n"
    cells = [
        ("billing=4,cpu=4,node=1", "gpu:4"),
        ("cpu=8,node=1", "gpu:a100:2(IDX:0-1),gpu:v100:1"),
        ("cpu=8,gres/gpu=8,node=1", "gpu:2"),  # AllocTRES first
        ("cpu=8,node=1", "mps:100"),  # CPU-only: skipped and counted
    ]
    text = head + "".join(f"{k}{run.format(*c)}" for k, c in enumerate(cells))
    trace = load_trace(write(tmp_path, text, "sacct.txt"))
    assert trace.set_index("job_id")["gpus"].to_dict() == {"0": 4, "1": 3, "2": 8}
    assert trace.attrs["load_report"]["skipped"] == {"no GPUs (CPU-only job)": 1}
    alone = "\n".join(
        "|".join(f for i, f in enumerate(line.split("|")) if i != 7) for line in text.splitlines()
    )
    gres = load_trace(write(tmp_path, alone + "\n", "gres.txt"))
    assert gres.set_index("job_id")["gpus"].to_dict() == {"0": 4, "1": 3, "2": 2}


def test_a_slurm_dump_with_no_gpu_anywhere_says_what_to_dump(tmp_path):
    head = "JobID|User|Account|Submit|Start|End|Elapsed|AllocTRES|State\n"
    row = "7|ann|olmo|2024-11-03T01:00:00|2024-11-03T02:00:00|2024-11-03T03:00:00|01:00:00|cpu=8,node=1|COMPLETED\n"
    err = error(write(tmp_path, head + row, "sacct.txt"))
    assert "no job has a GPU in AllocTRES" in str(err) and "dump AllocGRES too" in str(err)
    no_column = head.replace("AllocTRES|", "") + row.replace("cpu=8,node=1|", "")
    err = error(write(tmp_path, no_column, "cut.txt"), format="slurm")
    assert err.column == "AllocTRES" and "required column missing" in str(err)


def test_a_negative_gpu_count_is_an_error_not_a_cpu_only_job(tmp_path):
    """GPUs 0 is a CPU-only job (skipped); a negative count is a broken record."""
    lines = (FIXTURES / "philly_derived.csv").read_text().splitlines()
    lines[2] = lines[2].replace(",8,", ",-4,")
    path = write(tmp_path, "\n".join(lines) + "\n", "philly.csv")
    err = error(path)
    assert (err.row, err.column) == (3, "gpus") and "a negative GPU count" in str(err)
    skipped = load_trace(path, on_bad="skip").attrs["load_report"]["skipped"]
    before = load_trace(FIXTURES / "philly_derived.csv").attrs["load_report"]["skipped"]
    assert skipped["a negative GPU count (gpus)"] == 1
    assert skipped["no GPUs (CPU-only job)"] == before["no GPUs (CPU-only job)"]


@pytest.mark.parametrize(
    "attempts, field, problem",
    [
        ("x", "attempts", "not a list of objects (got 'x')"),
        ([None], "attempts", "not a list of objects (got [None])"),
        (
            [{"start_time": "2017-10-01 00:00:00", "end_time": "soon"}],
            "attempts[].end_time",
            "not a time (got 'soon')",
        ),
        (
            [{"start_time": "2017-10-01 00:00:00", "detail": {"gpus": []}}],
            "attempts[].detail",
            "not a list of objects",
        ),
        (
            [{"detail": [{"ip": "m1", "gpus": 4}]}],
            "attempts[].detail[].gpus",
            "not a list of GPU names (got 4)",
        ),
    ],
    ids=["a-string", "null-attempt", "bad-time", "detail-a-dict", "gpus-a-number"],
)
def test_a_philly_json_job_with_malformed_attempts_is_named_or_skipped(
    tmp_path, attempts, field, problem
):
    """The nesting and times of a job's attempts are checked: an AttributeError or TypeError
    with a traceback became a TraceError naming the job's place, the field and the value."""
    jobs = json.loads((FIXTURES / "philly_cluster_job_log.json").read_text())
    jobs[1]["attempts"] = attempts
    path = write(tmp_path, json.dumps(jobs), "cluster_job_log.json")
    err = error(path)
    assert (err.row, err.column) == (1, field) and problem in str(err)
    skipped = load_trace(path, on_bad="skip").attrs["load_report"]["skipped"]
    assert skipped[f"{problem.split(' (got')[0]} ({field})"] == 1


def test_unclosed_quote_and_ragged_rows(tmp_path):
    assert "quote" in str(
        error(write(tmp_path, 'job_id,submit_s,gpus,duration_s\na,0,1,5\n"b,1,1,5\nc,2,1,5\n'))
    )
    err = error(write(tmp_path, "job_id,submit_s,gpus,duration_s\na,0,1,5\nb,1,1,5,9\n"))
    assert err.row == 3
    first = error(write(tmp_path, "job_id,submit_s,gpus,duration_s\na,0,1,5,9\nb,1,1,5\n"))
    assert first.row == 2  # (pandas warns of the first data row without naming it)
    assert "5 fields, more than the header's 4 columns" in str(first)


def test_unknown_format_lists_the_columns(tmp_path):
    err = error(write(tmp_path, "alpha,beta\n1,2\n"))
    assert "alpha" in str(err) and "format" in str(err)


def test_missing_file(tmp_path):
    assert "no such file" in str(error(tmp_path / "nope.csv"))


# ----- property: malformed input raises only TraceError, never truncates ----------------------
CELLS = st.one_of(
    st.sampled_from(
        [
            "a",
            "b",
            "0",
            "1",
            "8",
            "-1",
            "1e400",
            "nan",
            "",
            " ",
            '"',
            "x,y",
            "3.5",
            "2020-01-01 00:00:00",
            "2020-01-01T00:00:00+08:00",
            "inf",
            "true",
            "|",
            ";",
            "é",
        ]
    ),
    st.text(st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=5),
)
HEADERS = st.sampled_from(
    [
        "job_id,submit_s,gpus,duration_s",
        "job_id,submit_s,gpus,duration_s,kind,preemptible",
        "timestamp,duration,num_gpus,cluster",
        "job_id,user,vc,gpu_num,state,submit_time,start_time,end_time",
        "job_id,submit_s,gpus",
        "job_id,job_id,gpus,duration_s",
        "",
        "a;b;c",
    ]
)


@settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    header=HEADERS,
    body=st.lists(st.lists(CELLS, min_size=0, max_size=9).map(",".join), max_size=8),
    on_bad=st.sampled_from(["error", "skip"]),
)
def test_malformed_csv_raises_only_trace_error_and_never_truncates(tmp_path, header, body, on_bad):
    path = write(tmp_path, "\n".join([header, *body]) + "\n", "fuzz.csv")
    try:
        trace = load_trace(path, on_bad=on_bad)
    except TraceError:
        return
    report = trace.attrs["load_report"]
    assert report["rows"] == len(body)
    assert report["jobs"] == len(trace) and report["rows"] == report["jobs"] + sum(
        report["skipped"].values()
    )


def test_every_loader_is_reachable_through_load():
    for fixture, (fmt, _, _) in EXPECTED.items():
        assert load(FIXTURES / fixture, format=fmt).report.format == fmt
