"""One settings object, kept with the store (issue 13 item 2).

Every setting of a store (recall, credit, sources, holdout, automation, governance) is one
:class:`memworth.Settings`, kept in the store with its versions; every face reads and
changes the same one: Python, ``memworth config``, ``GET/PUT /v1/config``, the MCP
``memworth://settings`` resource and a TOML file for ``serve`` and ``mcp``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client

from memworth import HashingEncoder, MemoryStore, Sidecar
from memworth.cli import main
from memworth.config_file import load
from memworth.errors import ValidationError
from memworth.governance import GovernancePolicy
from memworth.governance.parts import PARTS as GOVERNANCE_PARTS
from memworth.governance.parts import ChangeSettings
from memworth.mcp_server import create_server
from memworth.ranking import LowerBoundBlend
from memworth.server.app import create_app
from memworth.server.keys import create_key
from memworth.server.pool import StorePool
from memworth.settings import RecallSettings, Settings
from memworth.signals.coretrieval import AblationPlanner, AlarmSplitter
from memworth.signals.sources import SourceLimit
from tests.serving import free_port, memworth_serve

# -- the object ----------------------------------------------------------------------------


def test_settings_round_trip_through_json_with_every_kind_of_value() -> None:
    s = Settings(
        recall=RecallSettings(scoring=LowerBoundBlend(similarity=0.7, worth=0.3), exploration=0.0, planner="pairs"),
        governance=GovernancePolicy(theta_low=0.25, deprecation="fixed"),
    ).changed(
        {
            "sources.confidences": {"judge": 0.6},
            "sources.limits": {"judge": {"type": "SourceLimit", "max_per_memory": 3, "window": 60.0}},
            "sources.reliability": {"type": "Reliability", "prior_strength": 5.0},
            "sources.burst": None,
            "holdout.share": 0.1,
            "automation.govern_every": 25,
        }
    )
    back = Settings.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
    assert back.sources.limits["judge"] == SourceLimit(max_per_memory=3, window=60.0)
    assert back.sources.burst is None and back.holdout.share == 0.1 and back.recall.scoring.worth == 0.3


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"recall.exploration": 1.5}, "recall.exploration"),
        ({"recall.exploration": "0.1"}, "recall.exploration"),  # no silent coercion of text
        ({"recall.explore": 0.1}, "recall.explore"),
        ({"nope.x": 1}, "nope.x"),
        ({"min_evidence": 3}, "min_evidence"),  # in two parts: the part must be named
        ({"credit.rule": "shares"}, "credit.rule"),
        ({"credit.max_hops": True}, "credit.max_hops"),
        ({"recall.scoring.worth": -1}, "recall.scoring.worth"),
        ({"recall.scoring": {"type": "Nope"}}, "recall.scoring"),
        ({"sources.limits": {"ghost": {"type": "SourceLimit"}}}, "sources.limits"),
        ({"sources.limits": {"judge": {"max_outcomes": 3}}}, "sources.limits.judge"),
        ({"governance.theta_low": 0.9}, "governance.theta_low"),
        ({"governance.classes.theta_low": 0.9}, "governance.classes.theta_low"),
        ({"governance.change.threshold": -1}, "governance.change.threshold"),
        ({"change_threshold": 0}, "change_threshold"),
        ({"governance.change": {"threshold": 0}}, "governance.change.threshold"),
        ({"governance.change": {"thresh": 1}}, "governance.change.thresh"),
        ({"governance.change.thresh": 1}, "governance.change.thresh"),
        ({"governance.nope": 1}, "governance.nope"),
        ({"governance.change.threshold.x": 1}, "governance.change.threshold.x"),
        ({"holdout.share": 1.0}, "holdout.share"),
        ({"automation.govern_every": 0}, "automation.govern_every"),
        # a wait no thread can make (every verdict failed with OverflowError) is refused when set
        ({"automation.verifier_timeout": 1e10}, "automation.verifier_timeout"),
        ({"automation.verifier_timeout": 7 * 86400 + 1}, "automation.verifier_timeout"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        Settings().changed(changes)
    assert err.value.field == field, err.value


def test_governance_shows_its_parts_and_takes_the_flat_names_as_aliases() -> None:
    shown = Settings().to_dict()["governance"]
    order = ["classes", "standing", "low_worth", "staleness", "change", "probes", "limits", "holdout_guard"]
    assert list(shown) == list(GOVERNANCE_PARTS) == order
    assert shown["change"]["threshold"] == 12.0 and shown["low_worth"]["rule"] == "sequential"
    want = Settings().changed({"governance.change.threshold": 9})
    assert want.governance.change.threshold == 9 and want.governance.change.alpha == 0.05
    for alias in (
        {"governance.change_threshold": 9},
        {"change_threshold": 9},
        {"change.threshold": 9},
        {"governance.change": {"threshold": 9}},  # a part as an object: only what it names changes
    ):
        assert Settings().changed(alias) == want, alias
    assert Settings.diff(Settings(), want) == ["governance.change.threshold"]
    # a bare name keeps the meaning it had: limits is sources.limits, rule is credit.rule
    limited = Settings().changed({"limits": {"implicit": {"type": "SourceLimit", "max_per_memory": 2}}})
    assert limited.sources.limits["implicit"].max_per_memory == 2
    assert Settings().changed({"rule": "score"}).credit.rule == "score"
    assert Settings().changed({"governance.limits.pin_evidence": 5}).governance.limits.pin_evidence == 5


# -- kept with the store -------------------------------------------------------------------


def test_a_store_keeps_its_settings_and_every_change_is_a_version(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder()) as store:
        assert store.settings_record() is None and store.config()["version"] == 0  # defaults, nothing written
    with MemoryStore.open(url, exploration=0.0, propagation=0.2, policy=GovernancePolicy(theta_low=0.3)) as store:
        assert store.config()["version"] == 1
        assert store.settings_record()["changed"] == [
            "recall.exploration",
            "credit.propagation",
            "governance.classes.theta_low",
        ]
    with MemoryStore.open(url) as store:  # names nothing: works under the kept settings
        assert (store.exploration, store.propagation, store.policy.theta_low) == (0.0, 0.2, 0.3)
        assert store.configure({"recall.exploration": 0.0}, actor="ops") == 1  # the same: no new version
        assert store.configure({"governance.theta_high": 0.7, "credit.rule": "score"}, actor="ops") == 2
        assert (store.credit, store.policy.theta_high, store.taxonomy.theta_high) == ("score", 0.7, 0.7)
        with pytest.raises(ValidationError):
            store.configure({"governance.theta_high": 0.1, "recall.exploration": 0.5})  # below theta_low
        assert store.exploration == 0.0 and store.config()["version"] == 2  # nothing changed half-way
    with MemoryStore.open(url) as store:
        history = store.settings_history()
        assert [(v["version"], v["actor"]) for v in history] == [(1, "python"), (2, "ops")]
        assert history[1]["changed"] == ["credit.rule", "governance.classes.theta_high"]
        assert store.credit == "score"


def test_a_store_made_before_settings_were_kept_reads_its_policy_and_holdout(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder()) as store:  # as an older memworth left it
        policy = GovernancePolicy(theta_low=0.33).flat_settings()  # flat: before the policy had parts
        store.backend.set_meta("policy", json.dumps({"version": 4, "settings": policy, "at": 1.0}))
        store.backend.set_meta("holdout", json.dumps({"share": 0.2, "seed": 7}))
    with MemoryStore.open(url) as store:
        assert store.policy.theta_low == 0.33 and (store.holdout, store.settings.holdout.seed) == (0.2, 7)
        assert store.config()["version"] == 1
        store.configure({"recall.exploration": 0.05})
        assert store.settings.governance.theta_low == 0.33 and store.config()["version"] == 2
        assert [(v["version"], v["actor"]) for v in store.settings_history()] == [(1, "before settings"), (2, "python")]


def test_a_store_that_kept_the_flat_governance_shape_loads_unchanged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flat.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.05) as store:
        record = store.settings_record()
        assert record is not None
        policy = GovernancePolicy(theta_low=0.33, change_threshold=9.0, deprecation="fixed")
        record["settings"]["governance"] = policy.flat_settings()  # as memworth kept it before the parts
        store.backend.set_meta("settings", json.dumps(record))
        store.backend.set_meta("settings_history", json.dumps([record]))
    with MemoryStore.open(url) as store:
        assert store.policy == policy and store.exploration == 0.05 and store.config()["version"] == 1
        assert store.config()["settings"]["governance"]["change"]["threshold"] == 9.0  # shown in parts
        # the history shows every version in today's shape
        assert store.settings_history()[0]["settings"]["governance"]["classes"]["theta_low"] == 0.33
        assert store.configure({"governance.change.threshold": 10}) == 2
        assert store.policy == dataclasses.replace(policy, change_threshold=10)


def test_the_recall_planner_is_a_setting(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), ablation=None) as store:
        assert store.ablation is None and store.settings.recall.planner == "none"
        store.configure({"recall.planner": "pairs", "recall.planner_share": 0.2})
        assert isinstance(store.ablation, AblationPlanner) and store.ablation.budget == 0.2
    with MemoryStore.open(url) as store:
        assert isinstance(store.ablation, AblationPlanner)
    splitter = AlarmSplitter(share=0.5, suspect=3.0, seed=1)
    with MemoryStore.open(url, ablation=splitter) as store:
        assert store.ablation is splitter and store.settings.recall.planner_share == 0.5


def test_the_sidecar_and_continuous_governance_follow_a_change(tmp_path: Path) -> None:
    with MemoryStore.open(f"sqlite:///{tmp_path / 'c.db'}", encoder=HashingEncoder(), seed=0) as store:
        store.add_many([{"id": f"m{i}", "text": f"memory {i}"} for i in range(3)])
        store.configure({"holdout.share": 0.5, "automation.govern_every": 2})
        helper = Sidecar(store)
        marked = [helper.retrieve([("m0", 0.9), ("m1", 0.5)], k=1) for _ in range(40)]
        held = sum(1 for r in marked if r.diagnostics.get("holdout"))
        assert 5 < held < 35  # the sidecar holds out the share the store was configured with
        assert store.govern_every == 2


# -- every face ------------------------------------------------------------------------------


def test_every_face_shows_and_changes_the_same_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'faces.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), policy=GovernancePolicy(theta_low=0.2)):
        pass
    assert main(["config", "set", "recall.exploration=0.02", "theta_high=0.55", "--store", url]) == 0
    capsys.readouterr()
    assert main(["config", "show", "--store", url, "--json"]) == 0
    from_cli = json.loads(capsys.readouterr().out)
    with MemoryStore.open(url) as store:
        assert from_cli == store.config()
        admin, plain = create_key(store, "ops", "root", admin=True), create_key(store, "team", "agent")
        with TestClient(create_app(store)) as client:
            for key in (admin, plain):
                got = client.get("/v1/config", headers={"Authorization": f"Bearer {key}"})
                assert got.status_code == 200 and got.json() == from_cli
            body = {"changes": {"recall.exploration": 0.07}, "actor": "alice"}
            refused = client.put("/v1/config", json=body, headers={"Authorization": f"Bearer {plain}"})
            assert refused.status_code == 403 and refused.json()["error"]["type"] == "Forbidden"
            bad = client.put(
                "/v1/config", json={"changes": {"recall.exploration": "lots"}}, headers={"X-API-Key": admin}
            )
            assert bad.status_code == 422 and bad.json()["error"]["field"] == "recall.exploration"
            assert store.exploration == 0.02
            done = client.put("/v1/config", json=body, headers={"X-API-Key": admin})
            assert done.status_code == 200 and done.json()["settings"]["recall"]["exploration"] == 0.07
        assert store.exploration == 0.07  # the served store works under it at once
        assert store.settings_history()[-1]["actor"] == "alice (api key root)"
        from_mcp = asyncio.run(_mcp_settings(store))
        assert from_mcp == store.config() and from_mcp["version"] == 3
    with MemoryStore.open(url) as store:
        assert store.exploration == 0.07 and store.policy.theta_high == 0.55 and store.policy.theta_low == 0.2


def test_a_running_server_follows_memworth_config_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0) as store:
        store.add("Prague is the capital of the Czech Republic.", id="prague", namespace="team")
        key = create_key(store, "team", "agent")
        app = create_app(store, workers=2, url=url)
        with TestClient(app) as client:
            objects = app.state.pool.stores
            assert len(objects) == 2
            for obj in objects:
                obj.settings_check_interval = 0.0  # look at every call (the default: at most once a second)
            h = {"X-API-Key": key}
            assert client.get("/v1/config", headers=h).json()["version"] == 0
            # another process, while the server runs
            assert main(["config", "set", "recall.exploration=0.04", "change.threshold=9", "--store", url]) == 0
            capsys.readouterr()
            assert all(obj.exploration == 0.1 for obj in objects)
            r = client.post("/v1/recall", json={"query": "capital of czechia", "k": 1}, headers=h)
            assert r.status_code == 200
            served_by = [obj for obj in objects if obj.exploration == 0.04]  # the object the recall ran on
            assert len(served_by) == 1 and served_by[0].policy.change.threshold == 9
            served = client.get("/v1/config", headers=h).json()
            assert served["version"] == 1 and served["settings"]["recall"]["exploration"] == 0.04
            for obj in objects:  # every other object at its next call
                obj.govern(namespace="team")
                assert obj.exploration == 0.04 and obj.policy.change.threshold == 9


def test_a_pool_change_never_puts_back_an_older_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'pool.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder()) as store:
        pool = StorePool(store, 2, url=url)
        try:
            configure = store.configure

            def then_another_process(*args: Any, **kwargs: Any) -> int:
                version = configure(*args, **kwargs)
                with MemoryStore.open(url) as other:  # keeps the next version before the pool's loop
                    other.configure({"credit.propagation": 0.2}, actor="other")
                return version

            monkeypatch.setattr(store, "configure", then_another_process)
            assert pool.configure({"recall.exploration": 0.03}, actor="ops", namespace="a") == 1
            history = store.settings_history()
            assert [(v["version"], v["actor"]) for v in history] == [(1, "ops"), (2, "other")]  # nothing reverted
            for obj in pool.stores:
                assert (obj.exploration, obj.propagation) == (0.03, 0.2)
        finally:
            pool.close()


async def _mcp_settings(store: MemoryStore) -> dict[str, Any]:
    async with Client(create_server(store)) as client:
        (content,) = (await client.read_resource("memworth://settings")).contents
        return dict(json.loads(content.text))  # type: ignore[union-attr]


def test_config_set_refuses_bad_settings_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    assert main(["config", "set", "min_evidence=3", "--store", url, "--encoder", "hashing"]) != 0
    err = capsys.readouterr().err
    assert "min_evidence" in err and "name the part" in err and "Traceback" not in err


# -- the configuration file ----------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "memworth.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("stor = 'x'", "stor"),
        ("[server]\nport = '80'", "server.port"),
        ("[server]\nthreads = 2", "server.threads"),  # an unknown entry (workers is known since issue 17)
        ("[server]\nworkers = 'four'", "server.workers"),
        ("[settings.recall]\nexploration = 2.0", "settings.recall.exploration"),
        ("[settings.nope]\nx = 1", "settings.nope.x"),
        ("[settings.governance.change]\nthresh = 9", "settings.governance.change.thresh"),
        ("[settings.governance.change]\nthreshold = -9", "settings.governance.change.threshold"),
        ("[settings.governance]\nchange_threshold = 0", "settings.governance.change_threshold"),
        ("[server\nport = 1", "config"),
    ],
)
def test_a_bad_configuration_file_is_refused_naming_the_entry(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        load(_write(tmp_path, text))
    assert err.value.field == field and str(tmp_path) in err.value.reason


def test_a_configuration_file_takes_the_governance_parts_and_the_flat_names(tmp_path: Path) -> None:
    text = "[settings.governance.change]\nthreshold = 9\n[settings.governance]\ntheta_low = 0.3\n"
    found = load(_write(tmp_path, text))
    settings = Settings().changed(found.settings)
    assert settings.governance.change == ChangeSettings(threshold=9) and settings.governance.classes.theta_low == 0.3


def test_a_flag_wins_over_the_file_and_the_file_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memworth.store_cli import _resolve_options

    path = _write(tmp_path, "store = 'sqlite:///from-file.db'\n[server]\nport = 9100\nhost = '0.0.0.0'\n")
    monkeypatch.setenv("MEMWORTH_STORE", "sqlite:///from-env.db")
    monkeypatch.setenv("MEMWORTH_LOG_LEVEL", "debug")
    args = argparse.Namespace(
        config=str(path), config_table="server", store=None, host="127.0.0.2", port=None, log_level=None, redis=None
    )
    _resolve_options(args)
    assert (args.store, args.host, args.port, args.log_level) == ("sqlite:///from-file.db", "127.0.0.2", 9100, "debug")


def test_memworth_serve_reads_a_configuration_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder()) as store:
        key = create_key(store, "ns", "k")
    port = free_port()
    path = _write(
        tmp_path,
        f"store = '{url}'\n[server]\nport = {port}\nlog_level = 'warning'\n"
        "[settings.recall]\nexploration = 0.03\n[settings.governance]\ntheta_low = 0.31\n",
    )
    with memworth_serve("--config", str(path)) as server:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/config", headers={"X-API-Key": key})
        served = json.loads(server.first_answer(req, timeout=1))
    assert served["settings"]["recall"]["exploration"] == 0.03
    assert served["settings"]["governance"]["classes"]["theta_low"] == 0.31
    with MemoryStore.open(url) as store:
        assert store.exploration == 0.03
        assert store.settings_history()[-1]["actor"] == f"config file {path}"


@pytest.mark.parametrize(
    ("name", "bad", "good"),
    [
        ("probe_share", 5, 0.25),
        ("exploration", -0.1, 0.0),
        ("min_evidence", float("nan"), 3.0),
        ("scoring", "blend", None),
        ("index", "faster", "exact"),
        ("index_threshold", 0, 10),
        ("credit", "everyone", "score"),
        ("w_min", 2.0, 0.1),
        ("propagation", 1.0, 0.5),
        ("max_hops", 11, 2),
        ("sources", {"llm": 2.0}, {"llm": 0.3}),
        ("limits", {"nobody": None}, {}),
        ("reliability", "yes", None),
        ("burst", 3, None),
        ("holdout", 1.5, 0.2),
        ("govern_every", 0, 7),
        ("verifier_timeout", 0, 2.0),
        ("policy", None, GovernancePolicy(pin_evidence=3)),
        ("ablation", "everything", "none"),
        ("verifier", 3, None),
        ("clock", "noon", None),
    ],
)
def test_a_setting_assigned_as_an_attribute_is_validated_like_open_and_configure(
    name: str, bad: object, good: object
) -> None:
    """Before, ``store.probe_share = 5`` was taken as given (only ``open`` and ``configure``
    checked a value): recall then served quarantined memories on every call and logged a
    propensity above 1. Every setting a store takes is now checked on assignment by the one
    validator, the error names it, and a refused assignment changes nothing."""
    s = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0)
    before, settings = getattr(s, name), s.settings.to_dict()
    with pytest.raises(ValidationError) as err:
        setattr(s, name, bad)
    assert err.value.field == name
    assert getattr(s, name) is before and s.settings.to_dict() == settings
    if name not in ("holdout", "policy"):  # open reads None as "the kept one" for these two
        with pytest.raises(ValidationError) as opened:  # the same words as opening a store with it
            MemoryStore.open("memory://", encoder=HashingEncoder(), **{name: bad})
        assert str(opened.value) == str(err.value)
    if good is not None:
        setattr(s, name, good)
        if name == "sources":  # the attribute holds the default sources too
            assert s.sources["llm"] == 0.3 and s.sources["explicit"] == 1.0
        else:
            assert getattr(s, name) == (None if name == "ablation" else good)
        assert s.settings_version == 0  # in force on this object; configure keeps a version


def test_a_setting_assigned_on_a_wrapper_is_refused_naming_it() -> None:
    """``async_store.probe_share = 5`` made a wrapper attribute nothing read (found in review);
    a rolled-back transaction put the recall planner back as a new assignment (re-adopting
    every setting and replacing the planner object the store was given)."""
    import asyncio

    from memworth import HashingEncoder, MemoryStore, Sidecar
    from memworth.aio import AsyncMemoryStore, AsyncSidecar

    async def wrapped() -> None:
        a = await AsyncMemoryStore.open("memory://", encoder=HashingEncoder())
        try:
            with pytest.raises(ValidationError) as err:
                a.probe_share = 0.2
            assert err.value.field == "probe_share" and a.store.probe_share == 0.1
            side = AsyncSidecar(Sidecar.open("memory://", encoder=HashingEncoder()))
            with pytest.raises(ValidationError):
                side.govern_every = 5
            await side.aclose()
        finally:
            await a.aclose()

    asyncio.run(wrapped())
    side = Sidecar.open("memory://", encoder=HashingEncoder())
    with pytest.raises(ValidationError, match=r"^exploration: is a setting of the wrapped store"):
        side.exploration = 0.5
    side.auto_register = False  # the wrapper's own attributes are still its own
    side.close()
    s = MemoryStore.open("memory://", encoder=HashingEncoder(), ablation="split")
    given = s._planner_given
    with pytest.raises(RuntimeError), s.transaction():
        s.add("x y", id="x")
        raise RuntimeError("roll back")
    assert s._planner_given is given and s.ablation is not None
