"""Per-setting audit CSVs: written with a row-count trailer, checked whole before merging."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpaudit import scores
from dpaudit.audit import audit_seed_groups, audit_setting
from dpaudit.mechanisms.one_run_ideal import randomized_response_score_file
from dpaudit.scores import ScoreFileError
from dpaudit.tables import (
    AuditTableError,
    concat_tables,
    order_by_estimator,
    read_audit_csv,
    write_audit_csv,
)
from dpaudit.verdict import add_verdicts, check_certifiable, verdict_table

SPEC = {"method": "one_run"}


@pytest.fixture
def seed_files(tmp_path):
    """Two seeds of one one-run setting, one score file each."""
    paths = []
    for seed in (0, 1):
        sf = randomized_response_score_file(100, 2.0, 1e-6, seed=seed, setting="eps2")
        sf.meta["seed"] = seed
        paths.append([str(scores.write(tmp_path / f"seed{seed}.npz", sf))])
    return paths


@pytest.fixture
def audit_csv(tmp_path, seed_files):
    """A per-setting audit CSV as the audit rule writes it."""
    path = tmp_path / "audit" / "one_run" / "eps2.csv"
    write_audit_csv(path, audit_seed_groups(seed_files, "one_run", SPEC))
    return path


def test_complete_table_round_trips(audit_csv, seed_files):
    table = read_audit_csv(audit_csv)
    expected = audit_seed_groups(seed_files, "one_run", SPEC)
    assert len(table) == len(expected) > 2
    assert set(table["seed"]) == {0, 1}
    pd.testing.assert_series_equal(table["epsilon"], expected["epsilon"])
    assert len(concat_tables([audit_csv, audit_csv])) == 2 * len(expected)


def test_every_truncation_is_an_error_naming_the_file(audit_csv, tmp_path):
    """Cut to its header, mid-row, at a row boundary, or to zero bytes: never merged."""
    raw = audit_csv.read_bytes()
    cut = tmp_path / "cut.csv"
    line_ends = [i + 1 for i, b in enumerate(raw) if b == ord("\n")]
    near_ends = {i + d for i in [0, *line_ends] for d in (-2, -1, 0, 1, 2)}
    sizes = sorted({*range(0, len(raw), 7), *near_ends} & set(range(len(raw))))
    for size in sizes:
        cut.write_bytes(raw[:size])
        with pytest.raises(AuditTableError, match="cut.csv: "):
            concat_tables([audit_csv, cut])
    # the messages say what is wrong
    cut.write_bytes(b"")
    with pytest.raises(AuditTableError, match="cut.csv: the audit table is empty"):
        concat_tables([cut])
    cut.write_bytes(raw[: line_ends[0]])  # the header alone
    with pytest.raises(AuditTableError, match="cut.csv: the audit table does not end with its row"):
        concat_tables([cut])
    cut.write_bytes(raw[: line_ends[2] - 5])
    with pytest.raises(AuditTableError, match="cut.csv: the audit table does not end with a newl"):
        concat_tables([cut])
    cut.write_bytes(raw[: line_ends[2]])  # at a row boundary
    with pytest.raises(AuditTableError, match="cut.csv: the audit table does not end with its row"):
        concat_tables([cut])
    lines = raw.decode().splitlines(keepends=True)
    cut.write_text("".join(lines[:2] + lines[-1:]))  # rows lost, trailer kept
    with pytest.raises(AuditTableError, match=r"cut.csv: the row-count line declares \d+ data row"):
        concat_tables([cut])


def test_missing_values_name_the_file_and_line(audit_csv, tmp_path):
    table = read_audit_csv(audit_csv)
    table.loc[2, "epsilon"] = float("nan")
    bad = tmp_path / "nan.csv"
    write_audit_csv(bad, table)
    with pytest.raises(
        AuditTableError,
        match=r"nan.csv: line 4 \(data row 3\) has no value in "
        r"\['epsilon'\]",
    ):
        concat_tables([bad])
    # a row cut short and completed with a newline: its last fields are missing
    lines = audit_csv.read_text().splitlines(keepends=True)
    lines[1] = ",".join(lines[1].split(",")[:5]) + "\n"
    short = tmp_path / "short.csv"
    short.write_text("".join(lines))
    with pytest.raises(AuditTableError, match=r"short.csv: line 2 \(data row 1\) has no value"):
        concat_tables([short])
    write_audit_csv(bad, table.drop(columns="valid"))
    with pytest.raises(
        AuditTableError,
        match=r"nan.csv: not an audit table: missing column\(s\) "
        r"\['valid'\]",
    ):
        concat_tables([bad])
    with pytest.raises(AuditTableError, match="gone.csv: cannot read the audit table"):
        concat_tables([tmp_path / "gone.csv"])


def test_a_setting_skipped_by_design_is_a_complete_empty_table(tmp_path):
    """LiDP with ``below_order: skip`` returns no row for K = 1 (too few canaries for order 2):
    the audit job writes a complete table with no rows, which merges as nothing, while the same
    header without its trailer is a truncated file."""
    from dpaudit.mechanisms.lidp_gaussian import score_file

    sf = score_file(n=64, K=1, d=100, epsilon=2.0, delta=1e-5, seed=0)
    path = [str(scores.write(tmp_path / "k1.npz", sf))]
    spec = {"method": "lidp", "order": 2, "below_order": "skip"}
    table = audit_seed_groups([path], "lidp_wilson2", spec)
    assert table.empty
    out = tmp_path / "k1.csv"
    write_audit_csv(out, table)
    assert read_audit_csv(out).empty
    assert len(concat_tables([out])) == 0
    header_only = tmp_path / "header.csv"
    header_only.write_text(out.read_text().splitlines(keepends=True)[0])
    with pytest.raises(AuditTableError, match="header.csv: the audit table does not end with"):
        concat_tables([header_only])


def test_an_estimator_that_does_not_apply_is_an_error(seed_files):
    with pytest.raises(
        ScoreFileError,
        match=r"seed0.npz: estimator 'lidp' .*does not apply to "
        r"this file's design 'one_run'; methods for 'one_run': \[",
    ):
        audit_seed_groups(seed_files, "lidp", {"method": "lidp"})
    with pytest.raises(ValueError, match="no seeds"):
        audit_seed_groups([], "one_run", SPEC)


def test_verdicts_flag_only_valid_bounds_above_the_claim():
    from dpaudit.verdict import (
        FLAGGED,
        NO_CLAIM,
        NOT_A_BOUND,
        add_verdicts,
        verdict_table,
    )

    t = pd.DataFrame(
        {
            "sampler": ["poisson", "no_shuffle", "no_shuffle", "shuffle", "shuffle"],
            "design": "multi_run",
            "evidence": 1000,
            "claimed_epsilon": [2.0, 2.0, 2.0, 2.0, None],
            "epsilon": [1.5, 2.5, 3.0, 9.0, 5.0],
            "valid": [True, True, "False", False, True],
            "confidence": [0.95] * 5,
        }
    )
    v = add_verdicts(t)
    below = "not flagged: no evidence at 1,000 runs"  # the bound below the claim says no more
    assert list(v["verdict"]) == [below, FLAGGED, NOT_A_BOUND, NOT_A_BOUND, NO_CLAIM]
    assert list(v["exceeds_claim"]) == [0, 1, 0, 0, 0]
    table = verdict_table(t, ["sampler"]).set_index("sampler")
    assert list(table.index) == ["no_shuffle", "poisson"]  # shuffle: no valid row with a claim
    assert table.loc["no_shuffle", "epsilon_lower_bound"] == 2.5  # the invalid 3.0 is ignored
    assert table.loc["no_shuffle", "verdict"] == FLAGGED
    assert table.loc["poisson", "verdict"] == below
    # a table written before the evidence column: no count to state
    old = add_verdicts(t.drop(columns=["evidence"]))
    assert old["verdict"].iloc[0] == "not flagged: no evidence"
    with pytest.raises(ValueError, match="buffer_size"):
        verdict_table(t, ["buffer_size"])


# ---- one audit job per setting: every estimator, each score file read once ------------------

SPECS = {
    "one_run": SPEC,
    "one_run_90": {"method": "one_run", "confidence": 0.9, "selections": ["bonferroni"]},
    "metrics": {"method": "attack_metrics", "fprs": [0.01], "resamples": 50},
}


def test_a_setting_audit_is_each_estimators_audit_in_order(seed_files):
    """The rows of one audit job equal the per-estimator audits concatenated in the order of
    the blocks, seed by seed within an estimator, with each seed's file read once."""
    want = pd.concat(
        [audit_seed_groups(seed_files, name, spec) for name, spec in SPECS.items()],
        ignore_index=True,
    )
    got = audit_setting(seed_files, SPECS)
    pd.testing.assert_frame_equal(got, want)
    assert list(dict.fromkeys(got["estimator"])) == list(SPECS)
    reversed_specs = dict(reversed(list(SPECS.items())))
    assert list(dict.fromkeys(audit_setting(seed_files, reversed_specs)["estimator"])) == list(
        reversed_specs
    )


def test_a_setting_audit_reads_each_score_file_once(seed_files, monkeypatch):
    reads = []
    real_read = scores.read
    monkeypatch.setattr(scores, "read", lambda path: reads.append(path) or real_read(path))
    audit_setting(seed_files, SPECS)
    assert sorted(reads) == sorted(p for seed in seed_files for p in seed)


def test_a_setting_audit_names_the_estimator_that_does_not_apply(seed_files):
    with pytest.raises(ScoreFileError, match=r"seed0.npz: estimator 'lidp' "):
        audit_setting(seed_files, {"one_run": SPEC, "lidp": {"method": "lidp"}})
    with pytest.raises(ValueError, match="no estimators"):
        audit_setting(seed_files, {})


def test_the_audit_table_orders_the_per_setting_rows_by_estimator():
    """Per-setting files concatenated setting by setting give each estimator's rows setting by
    setting (stable), in the experiment's estimator order; a stray estimator is an error."""
    per_setting = pd.DataFrame(
        {
            "estimator": ["b", "a", "b", "a", "a"],
            "setting": ["s1", "s1", "s2", "s2", "s2"],
            "seed": ["0", "0", "0", "0", "1"],
        }
    )
    got = order_by_estimator(per_setting, ["b", "a"])
    assert list(zip(got["estimator"], got["setting"], got["seed"], strict=True)) == [
        ("b", "s1", "0"),
        ("b", "s2", "0"),
        ("a", "s1", "0"),
        ("a", "s2", "0"),
        ("a", "s2", "1"),
    ]
    assert order_by_estimator(per_setting.iloc[:0], ["a"]).empty
    with pytest.raises(ValueError, match=r"estimator\(s\) \['b'\] not in \['a'\]"):
        order_by_estimator(per_setting, ["a"])


# ---- the practitioner's verdict table: its evidence, the known lower bound, the family -------


def _multi_run_file(sampler: str, adversary: str, seed: int = 0) -> scores.ScoreFile:
    """A small multi_run score file with the meta training writes (one epoch of T = 100)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    member = np.repeat(np.array([1, 0], np.int8), 200)[:, None]
    return scores.ScoreFile(
        score=rng.standard_normal((400, 1)) + member,
        membership=member,
        canary_id=np.zeros((400, 1), np.int64),
        meta={
            "experiment": "loaders",
            "setting": f"{sampler}_{adversary}",
            "seed": seed,
            "design": "multi_run",
            "threat_model": "per_step_dot",
            "claimed_epsilon": 0.394,
            "delta": 1e-5,
            "accountant": "opacus_prv_poisson",
            "sampler": sampler,
            "adversary": adversary,
            "noise_multiplier": 1.289,
            "steps": 100,
            "steps_per_epoch": 100,
        },
    )


def test_the_audit_row_carries_its_evidence_coverage_and_the_shuffle_lower_bound():
    from dpaudit.audit import POISSON_PARTIALLY_INFORMED, audit
    from dpaudit.mechanisms.shuffle_reference import shuffle_lower_bound

    spec = {"cp": {"method": "multi_run_cp", "confidence": 0.975, "selections": ["heldout"]}}
    files = [
        _multi_run_file("shuffle", "partially_informed"),
        _multi_run_file("poisson", "partially_informed"),
        _multi_run_file("poisson", "batch_worst_case"),
    ]
    t = audit(files, spec).set_index("setting")
    assert (t["evidence"] == 400).all()  # runs, both hypotheses
    assert t.loc["poisson_partially_informed", "not_covered"] == POISSON_PARTIALLY_INFORMED
    assert t.loc["poisson_batch_worst_case", "not_covered"] == ""
    assert t.loc["shuffle_partially_informed", "not_covered"] == ""  # a fixed data set, shifted
    # Chua et al.'s bound at sigma 1.289, T = 100: 2.33 (issue 28), for the full shuffle only
    bound = t.loc["shuffle_partially_informed", "shuffle_lower_bound"]
    assert (
        bound == pytest.approx(shuffle_lower_bound(1.289, 100, 1e-5)) == pytest.approx(2.334, 1e-3)
    )
    assert pd.isna(t.loc["poisson_batch_worst_case", "shuffle_lower_bound"])
    two_epochs = _multi_run_file("shuffle", "partially_informed")
    two_epochs.meta["steps"] = 200  # the single-epoch bound does not apply
    assert "shuffle_lower_bound" not in audit([two_epochs], spec)


def test_the_verdict_table_states_its_evidence_lower_bound_and_familywise_confidence():
    from dpaudit.verdict import familywise_confidence, verdict_table

    base = {"claimed_epsilon": 0.4, "valid": True, "confidence": 0.975, "design": "multi_run"}
    rows = pd.DataFrame(
        [
            {**base, "sampler": "shuffle", "setting": "a", "seed": 0, "epsilon": 0.1,
             "evidence": 1000, "shuffle_lower_bound": 2.33},
            {**base, "sampler": "shuffle", "setting": "b", "seed": 0, "epsilon": 0.2,
             "evidence": 1000, "shuffle_lower_bound": 2.33},
            # a second selection of file b: one file, counted once
            {**base, "sampler": "shuffle", "setting": "b", "seed": 0, "epsilon": 0.0,
             "evidence": 1000, "shuffle_lower_bound": 2.33},
            {**base, "sampler": "no_shuffle", "setting": "c", "seed": 0, "epsilon": 0.5,
             "evidence": 1000},
        ]
    )  # fmt: skip
    v = verdict_table(rows, ["sampler"]).set_index("sampler")
    assert v.loc["shuffle", "verdict"] == "not flagged: no evidence at 2,000 runs"
    assert v.loc["shuffle", "evidence"] == 2000 and v.loc["shuffle", "rows_combined"] == 3
    assert v.loc["shuffle", "shuffle_lower_bound"] == 2.33  # the truth is far above the claim
    assert pd.isna(v.loc["no_shuffle", "shuffle_lower_bound"])
    # four rows at 97.5%: every flag of the table holds at once at 90%
    assert v["familywise_confidence"].tolist() == pytest.approx([0.9, 0.9])
    assert v.loc["shuffle", "joint_confidence"] == pytest.approx(0.925)
    assert familywise_confidence([0.5, 0.4]) == 0.0  # clipped


def test_issue36_item4_a_bound_above_what_the_canaries_can_certify_is_refused(audit_csv):
    """Issue 36, item 4: an audit table edited to epsilon 99 (above the 3.49 that 100
    canaries can certify at all) ended as "flagged"; every verdict now refuses it."""
    table = read_audit_csv(audit_csv)
    valid = table.index[table["valid"].astype(bool)][0]
    table.loc[valid, "epsilon"] = 99.0
    write_audit_csv(audit_csv, table)  # a well-formed table: only the number is impossible
    message = (
        rf"data row {valid + 1} \(estimator one_run, setting eps2, seed 0\) has a valid bound "
        r"epsilon = 99 from 100 canaries, above the 3.493 that 100 canaries can certify"
    )
    with pytest.raises(AuditTableError, match=f"{audit_csv}: {message}"):
        read_audit_csv(audit_csv)
    raw = pd.read_csv(audit_csv, comment="#")
    with pytest.raises(AuditTableError, match=f"audit.csv: {message}"):
        verdict_table(raw, ["setting"], source="audit.csv")
    with pytest.raises(AuditTableError, match=message):
        add_verdicts(raw)
    # an invalid (uncorrected) row may say anything: it is never a bound
    raw.loc[valid, "valid"] = False
    check_certifiable(raw)


def test_no_family_free_one_run_estimator_exceeds_the_ceiling_it_is_checked_against(tmp_path):
    """Perfect guesses on m canaries: no row of an estimator that holds for every mechanism
    exceeds the ceiling (the uncorrected test of all m guesses equals it; the valid rows, which
    pay for their choice of guess count, stay below), so an honest table is never refused."""
    from dpaudit.audit import audit
    from dpaudit.scores import ScoreFile
    from dpaudit.verdict import one_run_ceiling

    specs = {
        "one_run": {"method": "one_run", "selections": ["bonferroni", "grid_max_uncorrected"]},
        "abstention": {"method": "fdp_abstention", "family": "approx_dp", "delta": 0.0},
        "fdp": {"method": "fdp_one_run", "family": "approx_dp", "delta": 0.0},
    }
    for m in (20, 100, 1000):
        member = (np.arange(m) % 2).astype(np.int8)
        meta = {
            "experiment": "e",
            "setting": "s",
            "seed": 0,
            "design": "one_run",
            "threat_model": "simulation",
            "claimed_epsilon": 1.0,
            "delta": 1e-5,
            "accountant": "none",
        }
        sf = ScoreFile(member[None].astype(float), member[None], np.arange(m)[None], meta)
        table = audit([sf], specs)
        check_certifiable(table)  # no error
        top = one_run_ceiling(m, 0.95)
        free = table[table["assumes"] == ""]
        assert set(free.loc[free["valid"].astype(bool), "estimator"]) == set(specs)
        assert (free["epsilon"] <= top + 1e-9).all()  # valid or not
        # the ceiling is attained: the test of all m guesses at once, uncorrected, equals it
        assert free["epsilon"].max() == pytest.approx(top, rel=1e-6)


def test_issue36_item1_membership_that_is_not_a_fair_coin_never_flags(tmp_path):
    """Issue 36, item 1: pure-noise scores with 990 of 1000 IN (b656a52: one_run bonferroni
    3.84 valid, flagged against a claim of 1) give rows without a bound whose verdict names the
    count; they survive the audit CSV's check, and the verdict table gives their implementation
    a row without a bound, never flagged. Beside a fair-coin seed, that seed decides."""
    import numpy as np

    from dpaudit.verdict import add_verdicts, verdict_table

    rng = np.random.default_rng(1)
    member = np.zeros((1, 1000), dtype=np.int8)
    member[0, rng.permutation(1000)[:990]] = 1
    sf = randomized_response_score_file(1000, 2.0, 1e-6, seed=0, setting="eps2")
    sf.score, sf.membership = rng.standard_normal((1, 1000)), member
    sf.meta["claimed_epsilon"] = 1.0
    path = scores.write(tmp_path / "seed0.npz", sf)
    csv = tmp_path / "eps2.csv"
    write_audit_csv(csv, audit_setting([[str(path)]], {"one_run": SPEC}))
    table = read_audit_csv(csv)
    note = "no verdict: membership is not a fair coin (990 of 1000 IN)"
    assert "membership_pvalue" in table and (table["membership_pvalue"] < 1e-3).all()
    rows = add_verdicts(table)
    assert (rows["verdict"] == note).all() and not rows["exceeds_claim"].any()
    verdict = verdict_table(table, ["setting"])
    assert verdict["verdict"].tolist() == [note] and verdict["flagged"].tolist() == [0]
    assert verdict["epsilon_lower_bound"].isna().all()
    fair = randomized_response_score_file(1000, 2.0, 1e-6, seed=1, setting="eps2")
    fair.meta["claimed_epsilon"] = 1.0
    both = audit_setting(
        [[str(path)], [str(scores.write(tmp_path / "seed1.npz", fair))]], {"one_run": SPEC}
    )
    mixed = verdict_table(both, ["setting"]).iloc[0]
    assert mixed["rows_combined"] == 2 and mixed["epsilon_lower_bound"] > 1.0
    assert mixed["excluded"].endswith(f"row(s): {note}")


def test_issue36_item4_a_zero_bound_from_few_canaries_is_certifiable():
    """Issue 36, item 4: with 4 canaries logit((1 - conf)^(1/m)) is negative; the trivial
    bound 0 such a run reports is not refused as an edit (the ceiling is never below 0)."""
    from dpaudit.verdict import one_run_ceiling

    assert one_run_ceiling(4, 0.975) == 0.0
    assert one_run_ceiling(100, 0.95) > 3


def test_issue37_the_verdict_table_shows_the_conformance_report_beside_the_bound():
    """Issue 37, "the report shows the conformance table beside the bounds": the conformance
    report a score file carries (``ConformanceReport.score_meta``) becomes audit-table columns
    and, per implementation, verdict-table columns beside the bound: the departing stages (their
    union over the seeds), the unseen ones, the measured epsilon (largest) beside the claim; a
    file without a report gets none of them."""
    from dpaudit.attach.conformance import STAGES, Check, report
    from dpaudit.audit import audit
    from dpaudit.keys import CONFORMANCE_COLUMNS
    from dpaudit.verdict import verdict_table

    def with_report(seed: int, departs: bool, eps: float):
        sf = randomized_response_score_file(100, 2.0, 1e-6, seed=seed, setting="eps2")
        sf.meta["seed"] = seed
        step = 7 if departs else None
        check = Check("noise", "scale", "0.1", "0.5", departs, 0.01, "chi-square",
                      first_flagged_step=step)
        facts = {"epsilon_estimate": eps, "epsilon_lower": eps - 0.5}
        sf.meta.update(report([check], 0.01, facts).score_meta())
        return sf

    files = [with_report(0, False, 1.5), with_report(1, True, 9.0)]
    rows = audit(files, {"one_run": SPEC})
    assert set(CONFORMANCE_COLUMNS) <= set(rows)
    assert sorted(rows["conformance_departs"].unique()) == ["noise", "none"]
    v = verdict_table(rows, ["setting"]).iloc[0]
    assert v["conformance_departs"] == "noise"
    # every stage but the one the check measured (the stages of dpaudit.attach.conformance)
    assert v["conformance_unseen"] == "; ".join(s for s in STAGES if s != "noise")
    assert v["measured_epsilon"] == 9.0 and v["measured_epsilon_lower"] == 8.5
    assert v["conformance_alpha"] == 0.01 and "epsilon_lower_bound" in v
    assert v["conformance_first_step"] == 7
    older = rows.drop(columns="conformance_first_step")  # an audit table from before the steps
    assert np.isnan(verdict_table(older, ["setting"]).iloc[0]["conformance_first_step"])
    plain = randomized_response_score_file(100, 2.0, 1e-6, seed=0, setting="eps2")
    bare = verdict_table(audit([plain], {"one_run": SPEC}), ["setting"])
    assert not set(CONFORMANCE_COLUMNS) & set(bare)
