"""The web dashboard: in process (escaping, filters, tenants, sign-in, CSRF) and in a real headless Chromium.

The browser test drives Debian's ``chromium`` through ``chromedriver`` (apt: chromium
chromium-driver) with selenium, against the app served by uvicorn over a SQLite store:
it signs in, filters and sorts the memories, opens a memory's page, approves a
governance proposal and undoes it, and saves a screenshot (also to the path in
``$MEMWORTH_SCREENSHOT`` when set, e.g. ``docs/dashboard.png`` for the README).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memworth import HashingEncoder, MemoryStore
from memworth.errors import UnknownMemoryError
from memworth.server import create_app, create_key, revoke_key
from memworth.server.dashboard import pages, trajectory
from memworth.server.dashboard.sessions import SESSION_SECONDS, Sessions
from tests.serving import uvicorn_thread

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def drive(store: MemoryStore, query: str, outcomes: list[bool], expect: str, namespace: str = "team") -> None:
    for ok in outcomes:
        recall = store.recall(query, k=1, namespace=namespace)
        assert [r.memory.id for r in recall] == [expect]
        store.record(recall.episode, success=ok)


def seed(store: MemoryStore) -> None:
    """Memories whose evidence makes governance propose deprecate, promote and re-verify."""
    store.add("Prague was the capital of Czechoslovakia.", id="cz", namespace="team", contexts=["geography"])
    store.add("Use list.reverse() to reverse a Python list.", id="rev", namespace="team", contexts=["python"])
    store.add("Water boils at 100 degrees Celsius at sea level.", id="boil", namespace="team", contexts=["physics"])
    store.add("The billing API charges through POST /v1/charge.", id="billing", namespace="team", contexts=["api"])
    store.add("The office wifi password rotates every Monday.", id="wifi", namespace="team")
    store.add("Tenant B's deploy token lives in the vault.", id="secret", namespace="other")
    drive(store, "capital of czechoslovakia", [False] * 25, "cz")  # enough for the error-controlled test
    drive(store, "reverse a python list", [True] * 12, "rev")
    drive(store, "water boils degrees celsius", [True, False] * 6, "boil")
    drive(store, "billing api charge endpoint", [True] * 12 + [False] * 20, "billing")


def rows(page: str) -> list[str]:
    table = re.search(r'<table id="memories">.*?</table>', page, re.S)
    assert table is not None, page
    return re.findall(r'<tr data-id="([^"]*)"', table.group(0))


# -- in process -------------------------------------------------------------------------


def sign_in(client: TestClient, key: str) -> str:
    """Sign in through the form; returns the session's CSRF token."""
    r = client.post("/dashboard/login", data={"key": key, "next": "/dashboard"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/dashboard"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/dashboard" in cookie
    found = re.search(r'name="csrf" value="([^"]+)"', client.get("/dashboard").text)
    assert found is not None
    return found.group(1)


def test_memory_text_and_ids_are_escaped(client: TestClient, store: MemoryStore) -> None:
    h = {"X-API-Key": create_key(store, "team", "t")}
    evil = "<script>alert('x')</script> & <img src=x onerror=alert(1)>"
    store.add(evil, id='a/"<b>', namespace="team", contexts=["<ctx>"], metadata={"note": "<i>meta</i>"})
    for path in ("/dashboard", "/dashboard/memories/a%2F%22%3Cb%3E", "/dashboard/governance"):
        r = client.get(path, headers=h)
        assert r.status_code == 200, path
        assert "<script>" not in r.text and "<img" not in r.text and "<b>" not in r.text and "<ctx>" not in r.text
        assert "script-src" not in r.headers["content-security-policy"]  # no script may run at all
    page = client.get("/dashboard/memories/a%2F%22%3Cb%3E", headers=h).text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;img" in page
    assert "&lt;i&gt;meta&lt;/i&gt;" in page and "a/&quot;&lt;b&gt;" in page
    assert 'href="/dashboard/memories/a%2F%22%3Cb%3E"' in client.get("/dashboard", headers=h).text


def test_the_settings_page_shows_each_part_and_the_versions_escaped(client: TestClient, store: MemoryStore) -> None:
    h = {"X-API-Key": create_key(store, "team", "t")}
    assert '<a href="/dashboard/settings">Settings</a>' in client.get("/dashboard", headers=h).text  # in the nav
    evil = "<script>alert('x')</script> & <img src=x>"
    store.configure({"sources.confidences": {"judge": 0.4}, "governance.change.threshold": 9}, actor=evil)
    other = MemoryStore(store.backend, encoder=HashingEncoder())  # another process keeps the next version
    other.configure({"recall.exploration": 0.05}, actor="ops")
    r = client.get("/dashboard/settings", headers=h)
    assert r.status_code == 200
    page = r.text
    assert "<script>" not in page and "<img" not in page  # the actor's name is text someone typed
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;img src=x&gt;" in page

    def value(setting: str) -> str:
        found = re.search(rf'<tr data-setting="{re.escape(setting)}"><td>[^<]*</td><td><code>([^<]*)</code>', page)
        assert found is not None, setting
        return found.group(1)

    assert value("recall.exploration") == "0.05"  # the version the other object kept: followed
    assert value("governance.change.threshold") == "9" and value("governance.classes.theta_low") == "0.4"
    assert value("credit.propagation") == "0.7" and value("holdout.share") == "0.0"
    assert value("sources.confidences") == '{"judge": 0.4}'.replace('"', "&quot;")
    assert re.findall(r'<h2 id="part-([a-z]+)">', page) == [
        "recall",
        "credit",
        "sources",
        "holdout",
        "automation",
        "governance",
    ]
    history = re.search(r'<table id="history">.*?</table>', page, re.S)
    assert history is not None
    versions = re.findall(
        r'<tr data-version="(\d+)"><td>\d+</td><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td>', history.group(0)
    )
    assert [v for v, _, _ in versions] == ["3", "2", "1"]  # newest first
    assert versions[0][1:] == ("ops", "recall.exploration")
    assert versions[1][2] == "sources.confidences, governance.change.threshold"


def test_filters_and_sorting(client: TestClient, store: MemoryStore) -> None:
    seed(store)
    h = {"X-API-Key": create_key(store, "team", "t")}

    def ids(query: str) -> list[str]:
        r = client.get(f"/dashboard?{query}", headers=h)
        assert r.status_code == 200, r.text
        return rows(r.text)

    assert sorted(ids("")) == ["billing", "boil", "cz", "rev", "wifi"]
    assert ids("class=low") == ["billing", "cz"]  # worth desc: 0.375 then 0
    assert ids("class=high") == ["rev"] and ids("class=uncertain") == ["wifi"] and ids("class=mixed") == ["boil"]
    assert ids("context=python") == ["rev"] and ids("context=nowhere") == []
    assert ids("status=deprecated") == []
    store.set_status("cz", "deprecated", reason="outdated", namespace="team")
    assert ids("status=deprecated") == ["cz"] and "cz" not in ids("status=active")
    assert ids("status=deprecated&class=high") == []
    assert ids("sort=worth&order=asc") == ["cz", "billing", "boil", "wifi", "rev"]
    assert ids("sort=worth&order=desc") == ["rev", "boil", "wifi", "billing", "cz"]  # ties keep id order
    assert ids("sort=retrievals&order=desc")[0] == "billing" and ids("sort=id&order=asc")[0] == "billing"
    page = client.get("/dashboard?class=low", headers=h).text
    assert (
        '<option value="low" selected>' in page and "0.375" in page and "[0.000, 0.133]" in page
    )  # Wilson, n = 12, no success: z^2 / (12 + z^2)
    for bad in ("class=best", "status=gone", "sort=colour", "order=up", "page=0", "page=x"):
        r = client.get(f"/dashboard?{bad}", headers=h)
        assert r.status_code == 422 and r.headers["content-type"].startswith("text/html"), bad
        assert 'id="problem"' in r.text


def test_unknown_pages_and_memories_are_404_pages(client: TestClient, store: MemoryStore) -> None:
    h = {"X-API-Key": create_key(store, "team", "t")}
    for path in ("/dashboard/memories/nope", "/dashboard/memories/%20edge", "/dashboard/no/such/page"):
        r = client.get(path, headers=h)
        assert r.status_code == 404 and r.headers["content-type"].startswith("text/html"), path
    assert "unknown memory id: &#x27;nope&#x27;" in client.get("/dashboard/memories/nope", headers=h).text
    assert client.get("/dashboard/", headers=h, follow_redirects=False).headers["location"] == "/dashboard"
    assert "/dashboard" not in str(client.get("/openapi.json").json()["paths"])  # pages are not API


def test_a_key_sees_only_its_own_namespace(client: TestClient, store: MemoryStore) -> None:
    seed(store)
    b = {"X-API-Key": create_key(store, "other", "b")}
    entry = store.set_status("cz", "suppressed", reason="checking", namespace="team")
    page = client.get("/dashboard", headers=b).text
    assert rows(page) == ["secret"] and "Prague" not in page and 'id="namespace">other<' in page
    assert client.get("/dashboard/memories/cz", headers=b).status_code == 404
    assert "Prague" not in client.get("/dashboard/governance", headers=b).text
    approve = {"memory_id": "cz", "action": "deprecate"}
    assert client.post("/dashboard/governance/approve", data=approve, headers=b).status_code == 404
    assert (
        client.post(f"/dashboard/audit/{entry.seq}/undo", data={}, headers=b).status_code == 404
    )  # not in its namespace
    assert store.get("cz", namespace="team").status == "suppressed"


def test_sign_in_sessions_and_csrf(client: TestClient, store: MemoryStore) -> None:
    seed(store)
    key = create_key(store, "team", "t")
    r = client.get("/dashboard/governance?x=1")
    assert r.status_code == 401 and 'name="next" value="/dashboard/governance?x=1"' in r.text
    assert 'id="problem"' not in r.text  # the first visit, before any sign-in attempt: no error shown
    page = client.get("/dashboard/memories/caf%C3%A9?x=%3Cb%3E")
    assert page.status_code == 401 and 'name="next" value="/dashboard/memories/caf%C3%A9?x=%3Cb%3E"' in page.text
    bad = client.post("/dashboard/login", data={"key": "mw_nope", "next": "/dashboard"})
    assert bad.status_code == 401 and 'id="problem">unknown API key<' in bad.text
    elsewhere = client.post(
        "/dashboard/login", data={"key": key, "next": "https://evil.example/"}, follow_redirects=False
    )
    assert elsewhere.headers["location"] == "/dashboard"  # never redirects off the dashboard
    for target in ("//evil.example/dashboard", "/dashboard\r\nSet-Cookie: x=1", "/dashboardx", "/dashboard/\u00e9"):
        r = client.post("/dashboard/login", data={"key": key, "next": target}, follow_redirects=False)
        assert r.headers["location"] == "/dashboard", target
    client.cookies.clear()
    csrf = sign_in(client, key)
    approve = {"memory_id": "cz", "action": "deprecate"}
    for forged in ("forged", "", "\u00e9t\u00e9"):
        assert client.post("/dashboard/governance/approve", data={**approve, "csrf": forged}).status_code == 403
    assert client.post("/dashboard/governance/approve", data=approve).status_code == 403
    cross = client.post(
        "/dashboard/governance/approve", data={**approve, "csrf": csrf}, headers={"Origin": "https://evil.example"}
    )
    assert cross.status_code == 403 and store.get("cz", namespace="team").status == "active"
    stale = client.post("/dashboard/governance/approve", data={"memory_id": "cz", "action": "promote", "csrf": csrf})
    assert stale.status_code == 422 and "governance proposes &#x27;deprecate&#x27;" in stale.text
    done = client.post("/dashboard/governance/approve", data={**approve, "csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303 and store.get("cz", namespace="team").status == "deprecated"
    (entry,) = store.audit("cz", namespace="team")
    assert entry.action == "deprecate" and entry.settings["numbers"]["retrievals"] == 25
    assert "Audit entry 1: deprecate" in client.get(done.headers["location"]).text
    undo = client.post(f"/dashboard/audit/{entry.seq}/undo", data={"csrf": csrf}, follow_redirects=False)
    assert undo.status_code == 303 and store.get("cz", namespace="team").status == "active"
    again = client.post(f"/dashboard/audit/{entry.seq}/undo", data={"csrf": csrf})
    assert again.status_code == 409 and "Not undone" in again.text  # the memory moved on since entry 1
    revoke_key(store, key)
    ended = client.get("/dashboard")
    assert ended.status_code == 401 and "was revoked" in ended.text  # a revoked key's session ends with it


def test_the_trajectory_rebuilds_the_live_counts(store: MemoryStore) -> None:
    store.add("Deploys go through the staging cluster first.", id="rule", namespace="team")
    store.add("Staging deploys need the release tag.", id="detail", namespace="team", derived_from=["rule"])
    drive(store, "staging deploys release tag", [True, True, False, True], "detail")
    drive(store, "deploys staging cluster first", [False, True], "rule")
    points = trajectory(store, "rule", "team")
    assert [p.direct for p in points] == [False, False, False, False, True, True]  # 4 via provenance, 2 retrieved
    live = store.get("rule", namespace="team").counts
    assert points[-1].counts == live and live.n == 2
    assert points[0].worth == 1.0 and points[2].worth == pytest.approx(2 / 3)
    assert all(p.lower <= p.worth <= p.upper for p in points)
    assert store.replay().consistent


def test_a_memory_page_shows_plot_proposal_and_audit(client: TestClient, store: MemoryStore) -> None:
    seed(store)
    h = {"X-API-Key": create_key(store, "team", "t")}
    page = client.get("/dashboard/memories/billing", headers=h).text
    svg = re.search(r'<svg id="trajectory".*?</svg>', page, re.S)
    assert svg is not None and svg.group(0).count('<circle class="outcome"') == 32 and "<polygon" in svg.group(0)
    plot = svg.group(0)  # the y axis is labelled, each threshold line too, and a legend keys the dots
    assert 'id="y-label"' in plot and ">worth (hits+ share)<" in plot
    assert re.search(r'class="threshold-label"[^>]*>theta_low 0\.\d+: below', plot)
    assert re.search(r'class="threshold-label"[^>]*>theta_high 0\.\d+: above', plot)
    legend = re.search(r'<g id="legend".*?</g></g>', plot)
    assert legend is not None and all(
        f">{k}<" in legend.group(0) for k in ("worth", "95% interval", "success", "failure")
    )
    assert ">hollow: credit via provenance<" in legend.group(0)
    assert "Governance proposes" in page and "re-verify" in page and "No changes yet." in page
    store.govern(apply=True, namespace="team")
    page = client.get("/dashboard/memories/billing", headers=h).text
    assert 'id="standing">re-verify<' in page and 'class="undo"' in page


def test_page_data_is_read_without_http(store: MemoryStore) -> None:
    seed(store)
    low = pages.memories_page(store, "team", value_class="low")
    assert [r.memory.id for r in low.rows] == ["billing", "cz"] and low.total == 2
    assert low.filters == {"status": None, "context": None, "class": "low"} and "python" in low.contexts
    for i in range(2 * pages.PAGE_SIZE + 5):
        store.add(f"Bulk note {i}.", id=f"bulk-{i:03d}", namespace="bulk")
    third = pages.memories_page(store, "bulk", sort="id", order="asc", page=3)
    assert third.total == 2 * pages.PAGE_SIZE + 5 and third.first == 2 * pages.PAGE_SIZE
    assert [r.memory.id for r in third.rows] == [f"bulk-{i:03d}" for i in range(200, 205)]
    assert pages.query_problem(None, "best", "worth", "desc", "1") == (
        "class must be one of high, mixed, uncertain, low, got 'best'"
    )

    before = pages.governance_page(store, "team")
    assert {p.memory_id for p in before.proposals} == {"cz", "rev", "billing"} and before.changes == []
    applied = store.govern(apply=True, namespace="team").applied
    after = pages.governance_page(store, "team")
    assert {(e.memory_id, e.action) for e in applied} == {(p.memory_id, p.action) for p in before.proposals}
    assert after.undoable == {e.seq for e in applied} and [e.seq for e in after.changes] == [3, 2, 1]
    moved = store.set_status("cz", "active", reason="still true", namespace="team")
    after = pages.governance_page(store, "team")
    first_cz = next(e.seq for e in applied if e.memory_id == "cz")
    assert moved.seq in after.undoable and first_cz not in after.undoable  # the newer entry has the last word

    page = pages.memory_page(store, "billing", "team")
    assert page.consistent and page.rebuilt == page.memory.counts and len(page.points) == 32
    assert page.klass.value_class.value == "low" and page.lower <= page.klass.worth <= page.upper
    assert [e.action for e in page.changes] == ["re-verify"] and page.undoable == {page.changes[0].seq}
    with pytest.raises(UnknownMemoryError):
        pages.memory_page(store, " padded ", "team")  # not even a valid id: not found either
    with pytest.raises(UnknownMemoryError):
        pages.memory_page(store, "billing", "other")


def test_sessions_expire_and_the_oldest_go_past_the_limit() -> None:
    now = [1000.0]
    sessions = Sessions(limit=2, clock=lambda: now[0])
    a = sessions.open("key-a")
    now[0] += 1
    b = sessions.open("key-b")
    first, second = sessions.find(a), sessions.find(b)
    assert first is not None and second is not None
    assert (first.key, second.key) == ("key-a", "key-b") and first.csrf != second.csrf
    now[0] += 1
    c = sessions.open("key-c")  # a third: the oldest, a, goes
    assert sessions.find(a) is None and sessions.find(b) is not None and sessions.find(c) is not None
    now[0] += SESSION_SECONDS - 0.5
    assert sessions.find(b) is None and sessions.find(c) is not None  # b expired, c has half a second left
    sessions.close(c)
    assert sessions.find(c) is None


# -- in a real browser ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """(base URL, API key of namespace "team", store URL) of a seeded store served by uvicorn."""
    url = f"sqlite:///{tmp_path_factory.mktemp('dash') / 'store.db'}"
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    seed(store)
    key = create_key(store, "team", "dashboard")
    with uvicorn_thread(create_app(store)) as port:
        yield f"http://127.0.0.1:{port}", key, url
    store.close()


def click_and_wait(d: Any, element: Any) -> None:
    """Click a link or button and wait for the next page to have loaded whole.

    A click returns before the navigation it starts: an element looked up right after it can
    be the old page's or missing (a CI run failed so: "Unable to locate element"). The old
    page is marked in its window object, which a navigation replaces; the wait is for a
    window without the mark whose document is complete. Element references are not used to
    tell the pages apart: asked about an element of a page going away, Chromium can answer
    with a generic error ("Node with given id does not belong to the document", another CI
    run) that a staleness check does not expect; every such error while the page changes
    means only "not yet"."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    d.execute_script("window.__memworthOldPage = true")
    element.click()
    WebDriverWait(d, 20, ignored_exceptions=(WebDriverException,)).until(
        lambda drv: drv.execute_script(
            "return window.__memworthOldPage === undefined && document.readyState === 'complete'"
        )
    )


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not (os.path.exists(p) and os.access(p, os.X_OK))]
    if missing:
        pytest.fail(
            f"the dashboard test needs Debian's chromium and chromedriver, missing: {', '.join(missing)} "
            "(apt-get install chromium chromium-driver)"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        pytest.fail(f"the dashboard test needs selenium (pip install -e '.[dev]'): {exc}")

    options = Options()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(arg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")  # selenium-manager must never download anything
        driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def test_the_dashboard_in_a_real_browser(served: tuple[str, str, str], browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base, key, url = served
    d = browser

    def submit(button: Any) -> None:
        click_and_wait(d, button)

    def table_ids() -> list[str]:
        return [tr.get_attribute("data-id") for tr in d.find_elements(By.CSS_SELECTOR, "#memories tbody tr")]

    def cell(memory_id: str, column: str) -> str:
        return str(d.find_element(By.CSS_SELECTOR, f'#memories tr[data-id="{memory_id}"] td.{column}').text)

    def filter_by(**chosen: str) -> None:
        for name, value in chosen.items():
            Select(d.find_element(By.ID, f"filter-{name}")).select_by_value(value)
        submit(d.find_element(By.ID, "apply-filters"))

    def status_of(memory_id: str) -> tuple[str, str]:
        with MemoryStore.open(url) as outside:  # a second connection: what the server wrote is in the database
            m = outside.get(memory_id, namespace="team")
            return m.status, m.standing

    d.get(f"{base}/dashboard")
    assert not d.find_elements(By.ID, "problem")  # a first visit shows no error, only the sign-in form
    d.find_element(By.ID, "key").send_keys(key)
    submit(d.find_element(By.ID, "sign-in"))
    assert d.find_element(By.ID, "namespace").text == "team"
    assert sorted(table_ids()) == ["billing", "boil", "cz", "rev", "wifi"]
    assert cell("cz", "worth") == "0.000" and cell("cz", "class") == "low"
    assert cell("rev", "worth") == "1.000" and cell("rev", "class") == "high"
    assert cell("boil", "class") == "mixed" and cell("wifi", "class") == "uncertain"

    filter_by(**{"class": "low"})
    assert table_ids() == ["billing", "cz"]
    filter_by(**{"class": "", "context": "python"})
    assert table_ids() == ["rev"]
    filter_by(context="", status="deprecated")
    assert table_ids() == [] and d.find_element(By.ID, "empty").text == "No memory matches."
    filter_by(status="active")
    assert len(table_ids()) == 5
    submit(d.find_element(By.ID, "sort-worth"))  # sorted by worth, descending, by default: this flips it
    assert table_ids() == ["cz", "billing", "boil", "wifi", "rev"]
    submit(d.find_element(By.ID, "sort-worth"))
    assert table_ids() == ["rev", "boil", "wifi", "billing", "cz"]

    submit(d.find_element(By.LINK_TEXT, "rev"))
    plot = d.find_element(By.ID, "trajectory")
    assert len(plot.find_elements(By.CSS_SELECTOR, "circle.outcome")) == 12 and plot.find_elements(
        By.CSS_SELECTOR, ".band"
    )
    assert plot.find_element(By.ID, "y-label").text.startswith("worth") and plot.find_elements(By.ID, "legend")
    assert d.find_element(By.CSS_SELECTOR, ".empty-audit").text == "No changes yet."

    submit(d.find_element(By.LINK_TEXT, "Governance"))
    proposed = {tr.get_attribute("data-id"): tr for tr in d.find_elements(By.CSS_SELECTOR, "#proposals tbody tr")}
    assert set(proposed) == {"cz", "rev", "billing"}
    assert "deprecate" in proposed["cz"].text and "worth 0" in proposed["cz"].text
    submit(d.find_element(By.CSS_SELECTOR, 'button.approve[data-id="cz"]'))
    assert "deprecate" in d.find_element(By.ID, "notice").text
    assert status_of("cz") == ("deprecated", "normal")
    assert "cz" not in {tr.get_attribute("data-id") for tr in d.find_elements(By.CSS_SELECTOR, "#proposals tbody tr")}
    submit(d.find_element(By.CSS_SELECTOR, "table.audit button.undo"))
    assert "restore" in d.find_element(By.ID, "notice").text
    assert status_of("cz") == ("active", "normal")

    d.get(f"{base}/dashboard/memories/billing")  # approve from a memory's own page, then look at its history
    submit(d.find_element(By.CSS_SELECTOR, 'button.approve[data-id="billing"]'))
    assert d.find_element(By.ID, "standing").text == "re-verify" and status_of("billing")[1] == "re-verify"
    assert len(d.find_elements(By.CSS_SELECTOR, "table.audit tbody tr")) == 1

    height = d.execute_script("return document.documentElement.scrollHeight")
    d.set_window_size(1280, min(max(int(height) + 140, 700), 2400))
    png = d.get_screenshot_as_png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    (tmp_path / "dashboard.png").write_bytes(png)
    target = os.environ.get("MEMWORTH_SCREENSHOT")
    if target:
        Path(target).write_bytes(png)


def test_the_verification_queue_shows_why_and_takes_a_verdict(client: TestClient, store: MemoryStore) -> None:
    key = create_key(store, "team", "t")
    store.add("Prague was the capital of Czechoslovakia.", id="cz", namespace="team")
    store.add("Water boils at 100 C.", id="water", namespace="team")
    store.set_standing("cz", "re-verify", reason="the country split in 1993", namespace="team")
    store.set_standing("water", "re-verify", reason="<b>check</b>", namespace="team")
    csrf = sign_in(client, key)
    page = client.get("/dashboard/governance").text
    assert 'id="queue"' in page and "the country split in 1993" in page and "<b>check</b>" not in page
    assert "waiting for probe outcomes" in page
    done = client.post(
        "/dashboard/queue/resolve",
        data={
            "memory_id": "cz",
            "verdict": "edited",
            "reason": "reworded",
            "text": "Prague is the Czech capital.",
            "csrf": csrf,
        },
        follow_redirects=False,
    )
    assert done.status_code == 303 and store.get("cz", namespace="team").status == "archived"
    (new,) = [m for m in store.list(namespace="team") if m.derived_from == ("cz",)]
    assert new.text == "Prague is the Czech capital." and "Audit entry" in client.get(done.headers["location"]).text
    ok = client.post("/dashboard/queue/resolve", data={"memory_id": "water", "verdict": "confirmed", "csrf": csrf})
    assert ok.status_code == 200 and store.get("water", namespace="team").standing == "normal"
    again = client.post("/dashboard/queue/resolve", data={"memory_id": "water", "verdict": "confirmed", "csrf": csrf})
    assert again.status_code == 409 and "not awaiting verification" in again.text
    bad = client.post("/dashboard/queue/resolve", data={"memory_id": "water", "verdict": "maybe", "csrf": csrf})
    assert bad.status_code == 422
    forged = client.post("/dashboard/queue/resolve", data={"memory_id": "water", "verdict": "stale", "csrf": "x"})
    assert forged.status_code == 403 and store.get("water", namespace="team").status == "active"
    assert 'id="no-queue"' in client.get("/dashboard/governance").text


def test_pin_and_unpin_from_a_memorys_page(client: TestClient, store: MemoryStore) -> None:
    key = create_key(store, "team", "t")
    store.add("Prague was the capital of Czechoslovakia.", id="cz", namespace="team")
    csrf = sign_in(client, key)
    assert "Not pinned" in client.get("/dashboard/memories/cz").text
    r = client.post("/dashboard/pin", data={"memory_id": "cz", "reason": "a person keeps it", "csrf": csrf})
    assert r.status_code == 200 and "Pinned by audit entry 1 (pin), until unpinned" in r.text
    assert store.report("cz", namespace="team").pin is not None
    r = client.post("/dashboard/unpin", data={"memory_id": "cz", "reason": "let it go", "csrf": csrf})
    assert r.status_code == 200 and "Not pinned" in r.text and store.report("cz", namespace="team").pin is None
    assert client.post("/dashboard/pin", data={"memory_id": "nope", "reason": "x", "csrf": csrf}).status_code == 404
    assert client.post("/dashboard/pin", data={"memory_id": "cz", "reason": "x", "csrf": "forged"}).status_code == 403


def test_a_phone_wide_window_and_the_dot_ids_in_a_real_browser(served: tuple[str, str, str], browser: Any) -> None:
    """At 420 px the page never scrolls sideways (a wide table scrolls inside itself), and the
    memories ``.`` and ``..``, whose path a browser would drop, open from their links."""
    from selenium.webdriver.common.by import By

    base, _, url = served
    with MemoryStore.open(url, exploration=0.0) as outside:
        outside.add("The memory whose id is a dot.", id=".", namespace="dots")
        outside.add("The memory whose id is two dots.", id="..", namespace="dots")
        for _ in range(12):  # enough outcomes for two pages of history
            outside.record(outside.recall("two dots", k=1, namespace="dots").episode, success=True)
        key = create_key(outside, "dots", "phone")
    d = browser
    d.delete_all_cookies()
    d.set_window_size(420, 900)
    try:
        d.get(f"{base}/dashboard")
        assert not d.find_elements(By.ID, "problem")
        d.find_element(By.ID, "key").send_keys(key)
        click_and_wait(d, d.find_element(By.ID, "sign-in"))
        assert d.find_element(By.ID, "namespace").text == "dots"

        def fits() -> None:
            wide = d.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
            assert wide[0] <= wide[1], (d.current_url, wide)

        fits()
        table = d.find_element(By.ID, "memories")
        assert d.execute_script("return arguments[0].scrollWidth > arguments[0].clientWidth", table)  # scrolls inside
        for memory_id, text in ((".", "is a dot"), ("..", "two dots")):
            d.get(f"{base}/dashboard")
            click_and_wait(d, d.find_element(By.CSS_SELECTOR, f'#memories tr[data-id="{memory_id}"] td.id a'))
            assert text in d.find_element(By.ID, "text").text, d.current_url
            fits()
        older = d.find_element(By.CSS_SELECTOR, 'a[rel="next"]')  # the outcomes of "..", a page at a time
        click_and_wait(d, older)
        assert "two dots" in d.find_element(By.ID, "text").text
        assert d.find_element(By.ID, "outcomes").text == "Outcomes 11-12 of 12, newest first"
        for page in ("/dashboard/governance", "/dashboard/settings", "/dashboard/login"):
            d.get(base + page)
            fits()
    finally:
        d.set_window_size(1280, 1000)


def test_the_queue_page_resolves_stale_as_deprecated_and_edited_under_a_chosen_id(
    client: TestClient, store: MemoryStore
) -> None:
    """Before, the dashboard's queue could only suppress a stale memory and gave an edited one
    a generated id, while every other face could deprecate it and name the new version. The
    form now has both fields, sent to the one library call: what a verdict would not use is
    refused (422, naming the field) with nothing changed, and a typed id is escaped."""
    key = create_key(store, "team", "t")
    for mid in ("old", "cz", "water"):
        store.add(f"A fact called {mid}.", id=mid, namespace="team")
        store.set_standing(mid, "re-verify", reason="check it", namespace="team")
    csrf = sign_in(client, key)
    page = client.get("/dashboard/governance").text
    form = re.search(r'<tr data-id="cz">.*?</form>', page, re.S)
    assert form is not None
    assert '<option value="deprecated">' in form.group(0) and 'name="new_id"' in form.group(0)

    def resolve(**fields: str) -> Any:
        return client.post("/dashboard/queue/resolve", data={**fields, "csrf": csrf}, follow_redirects=False)

    done = resolve(memory_id="cz", verdict="stale", reason="gone", status="deprecated")
    assert done.status_code == 303 and store.get("cz", namespace="team").status == "deprecated"
    default = resolve(memory_id="water", verdict="stale", reason="gone", status="")  # the select's default
    assert default.status_code == 303 and store.get("water", namespace="team").status == "suppressed"
    before = [(m.id, m.status, m.standing) for m in store.list(namespace="team")]
    for fields, field in [
        ({"verdict": "confirmed", "new_id": "old2"}, "new_id"),
        ({"verdict": "confirmed", "status": "deprecated"}, "status"),
        ({"verdict": "stale", "status": "archived"}, "status"),
        ({"verdict": "edited", "text": "New text.", "new_id": " spaced"}, "new_id"),
    ]:
        refused = resolve(memory_id="old", reason="why", **fields)
        assert refused.status_code == 422 and field in refused.text, (fields, refused.text)
    assert [(m.id, m.status, m.standing) for m in store.list(namespace="team")] == before
    edited = resolve(memory_id="old", verdict="edited", reason="reworded", text="The fact, reworded.", new_id="<b>2")
    assert edited.status_code == 303 and store.get("old", namespace="team").status == "archived"
    assert store.get("<b>2", namespace="team").derived_from == ("old",)
    assert "<b>2" not in client.get(edited.headers["location"]).text  # escaped wherever it is shown
    forged = client.post(
        "/dashboard/queue/resolve", data={"memory_id": "x", "verdict": "stale", "status": "deprecated", "csrf": "x"}
    )
    assert forged.status_code == 403
