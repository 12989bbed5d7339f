"""Real-browser fixtures: Debian's chromium driven by playwright, a Voila server for the Explorer
and a JupyterLab server for the notebooks, each on a free 127.0.0.1 port and stopped at the end.

Screenshots of every step, and the server logs, go to ``$IMPACTLAB_SCREENSHOTS`` or else a
temporary folder ``impactlab-browser-*``, which is kept. Its path is printed at the end of a
single-process run and, under xdist, with every failed browser test.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root, where chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
#: Seconds a server may take to answer its first request (a cold start on a 2-core machine).
SERVER_START_S = 90
ARTIFACTS = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``browser`` marker (select with ``-m browser``, skip with ``-m 'not browser'``)."""
    config.addinivalue_line(
        "markers", "browser: drives a real browser (chromium) against Voila or JupyterLab"
    )


def missing_tools() -> str:
    """Why browser tests cannot run here, or "" when they can."""
    if not CHROMIUM:
        return "chromium is not installed (apt-get install -y chromium; .ci/run does it)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install -e '.[test]')"
    return ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip browser tests, with the reason, on a machine without chromium or playwright."""
    reason = missing_tools()
    if not reason:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """Where the screenshots and server logs are, whenever a test made some (the times the
    browser tests measure are printed by ``tests/conftest.py``, which the xdist controller loads)."""
    folder = config.stash.get(ARTIFACTS, None)
    if folder is not None:
        terminalreporter.write_sep("-", "browser screenshots and server logs")
        terminalreporter.write_line(str(folder))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """Keep each phase's report on the test item, so fixtures can see whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    folder = item.config.stash.get(ARTIFACTS, None)
    if report.failed and folder is not None and "artifacts" in getattr(item, "fixturenames", ()):
        # Shown with the failure, also under xdist (where the terminal summary below is not ours).
        report.sections.append(("browser screenshots and server logs", str(folder)))
    return report


@pytest.fixture(scope="session")
def artifacts(request: pytest.FixtureRequest) -> Path:
    """The folder for screenshots and server logs (kept after the run)."""
    path = os.environ.get("IMPACTLAB_SCREENSHOTS")
    run = getattr(request.config, "workerinput", {}).get("testrunuid")  # shared by xdist workers
    if path:
        folder = Path(path)
    elif run:
        folder = Path(tempfile.gettempdir()) / f"impactlab-browser-{run}"
    else:
        folder = Path(tempfile.mkdtemp(prefix="impactlab-browser-"))
    folder.mkdir(parents=True, exist_ok=True)
    request.config.stash[ARTIFACTS] = folder
    return folder


@pytest.fixture
def shot(request: pytest.FixtureRequest, artifacts: Path):
    """``shot(page, "step")`` saves a full-page screenshot named after the test and the step."""
    steps = iter(range(1, 100))
    test = safe_name(request.node.name)

    def save(page, step: str) -> Path:
        path = artifacts / f"{test}-{next(steps):02d}-{step}.png"
        page.screenshot(path=path, full_page=True)
        return path

    return save


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(home: Path) -> dict[str, str]:
    """Environment for a server and its kernels: small runs, this checkout's package, a throwaway HOME."""
    env = dict(os.environ)
    env.update(
        IMPACTLAB_FAST="1",
        HOME=str(home),  # settings, workspaces, runtime files: nothing lands in the repository
        # Kernels start in notebooks/: put this checkout first, whatever the editable install points at.
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "QUERY_STRING"):
        env.pop(var, None)
    return env


class PortTaken(Exception):
    """The server's port was taken between ``free_port`` and the server binding it (another
    process, such as a notebook kernel of a parallel test, bound it meanwhile)."""


#: What Jupyter servers (Voila, JupyterLab) log when their port is taken.
PORT_TAKEN = re.compile(r"already in use|no available port", re.IGNORECASE)
#: Ports a server fixture tries, one after another, when each is taken as it starts.
PORT_TRIES = 3


def wait_until_answers(url: str, proc: subprocess.Popen, log: Path) -> None:
    """Poll ``url`` until the server answers (any HTTP status below 500); fail with the log's tail
    if the server dies or hangs (raise ``PortTaken`` if it died because its port was taken)."""
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = log.read_text()
            if PORT_TAKEN.search(said):
                raise PortTaken(said[-3000:])
            pytest.fail(f"server exited with {proc.returncode}:\n{said[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except urllib.error.HTTPError as answer:
            if answer.code < 500:
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)  # polling a process that is starting: there is no event to wait on
    pytest.fail(f"{url} did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def serve(cmd: list[str], probe: str, log: Path, home: Path) -> Iterator[subprocess.Popen]:
    """Run a server in its own process group until the block ends, also when it fails."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=server_env(home),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_until_answers(probe, proc, log)
            yield proc
        finally:
            stop(proc)


@contextlib.contextmanager
def serve_on_a_free_port(
    command: Callable[[int], tuple[list[str], str]], log: Path, home: Path
) -> Iterator[tuple[int, subprocess.Popen]]:
    """``serve`` the command ``command(port)`` gives (with its probe URL) on a port free when
    chosen; should another process take the port before the server binds it, again on another
    (up to ``PORT_TRIES`` ports). Yields the port and the server's process."""
    for attempt in range(1, PORT_TRIES + 1):
        port = free_port()
        cmd, probe = command(port)
        try:
            with serve(cmd, probe, log, home) as proc:
                yield port, proc
            return
        except PortTaken as taken:
            if attempt == PORT_TRIES:
                pytest.fail(
                    f"{PORT_TRIES} ports in a row were taken as the server started:\n{taken}"
                )


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's whole process group (kernels included), SIGKILL it if it lingers."""
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="session")
def voila_server(
    artifacts: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, subprocess.Popen]]:
    """(base URL, process) of a Voila server rendering notebooks/01-explorer.ipynb, started as
    the README says (``impactlab app``): from the repository root, whose voila.json preheats a
    kernel (it runs the notebook up to the page's request before anyone opens the page), with
    impactlab's page template (no CDN links)."""

    def command(port: int) -> tuple[list[str], str]:
        cmd = [sys.executable, "-m", "impactlab", "app", "notebooks/01-explorer.ipynb"]
        cmd += ["--no-browser", f"--port={port}", "--Voila.port_retries=0", "--Voila.ip=127.0.0.1"]
        # Any path but "/" answers (403: not an allowlisted file) without starting a kernel as "/"
        # would.
        return cmd, f"http://127.0.0.1:{port}/favicon.ico"

    home = tmp_path_factory.mktemp("voila-home")
    with serve_on_a_free_port(command, artifacts / "voila.log", home) as (port, proc):
        yield f"http://127.0.0.1:{port}", proc


@pytest.fixture(scope="session")
def voila_url(voila_server: tuple[str, subprocess.Popen]) -> str:
    """Base URL of the Voila server rendering notebooks/01-explorer.ipynb."""
    return voila_server[0]


@pytest.fixture
def voila_preheated(voila_server: tuple[str, subprocess.Popen], artifacts: Path) -> str:
    """Base URL of the Voila server once a preheated kernel waits for a page (see
    ``wait_until_preheated``), for measuring what a visitor of an idle server waits."""
    base, proc = voila_server
    wait_until_preheated(proc, int(base.rsplit(":", 1)[1]), artifacts / "voila.log")
    return base


def wait_until_preheated(proc: subprocess.Popen, port: int, log: Path) -> None:
    """Wait until a kernel of the Voila server ``proc`` has run notebook 01 up to its wait for a
    page: ``impactlab.widgets.preset_from_voila`` then holds a websocket open to the server's
    port (Voila logs nothing then), which this looks for among the kernels' connections."""
    import psutil  # a dependency of ipykernel, so there wherever Voila runs kernels

    deadline = time.monotonic() + SERVER_START_S
    server = psutil.Process(proc.pid)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"Voila exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        for kernel in server.children(recursive=True):
            with contextlib.suppress(psutil.Error):  # a kernel that ended meanwhile
                links = kernel.net_connections(kind="tcp")
                if any(
                    c.raddr and c.raddr.port == port and c.status == "ESTABLISHED" for c in links
                ):
                    return
        time.sleep(0.25)  # a kernel running a notebook: there is no event to wait on
    tail = log.read_text()[-3000:]
    pytest.fail(f"no Voila kernel waited for a page within {SERVER_START_S} s:\n{tail}")


LAB_SETTINGS = {
    # No saving: Run All must not write executed notebooks into the repository.
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # No news or update checks: nothing to fetch offline, fewer toasts over the notebook.
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    # Every cell in the page: by default JupyterLab skips rendering the cells out of view
    # (content-visibility), and their prompts then read as empty text, so a finished Run All
    # could look unfinished to a test that scrolled.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


@pytest.fixture(scope="session")
def lab(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, token) of a JupyterLab server whose root is the repository."""
    home = tmp_path_factory.mktemp("lab-home")
    for name, values in LAB_SETTINGS.items():
        path = home / ".jupyter" / "lab" / "user-settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    token = secrets.token_hex(16)

    def command(port: int) -> tuple[list[str], str]:
        cmd = [
            *(sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root"),
            f"--port={port}",
            "--ServerApp.port_retries=0",
            "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={ROOT}",
            # Opening a notebook makes a checkpoint, by default in notebooks/.ipynb_checkpoints/:
            # keep it out of the repository (an absolute checkpoint_dir replaces the per-folder one).
            f"--FileCheckpoints.checkpoint_dir={home / 'checkpoints'}",
        ]
        return cmd, f"http://127.0.0.1:{port}/api/status?token={token}"

    with serve_on_a_free_port(command, artifacts / "lab.log", home) as (port, _):
        yield f"http://127.0.0.1:{port}", token


@pytest.fixture(scope="session")
def browser() -> Iterator:
    """Debian's chromium, headless, launched by playwright (no ``playwright install``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@contextlib.contextmanager
def new_page(browser, artifacts: Path, failed) -> Iterator:
    """A fresh page in its own context. ``page.problems`` collects console and page errors,
    ``page.remote_failures`` the console errors of failed requests to other machines (see
    ``record_console_error``), ``page.requests`` the URL of every request the page makes,
    websockets included; ``page.outside_requests()`` lists those to other machines. If
    ``failed()`` says so at the end, a screenshot of the page as it was is saved, named
    ``<name>-FAILED.png`` after what ``failed`` returns."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.problems, page.remote_failures, page.requests = [], [], []
    page.on("pageerror", lambda exc: page.problems.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: record_console_error(page, msg))
    page.on("request", lambda request: page.requests.append(request.url))
    page.on("websocket", lambda socket: page.requests.append(socket.url))
    page.outside_requests = lambda: outside_requests(page)
    try:
        yield page
        name = failed()
        if name:
            with contextlib.suppress(
                Exception
            ):  # a crashed page cannot be shot; the failure stands
                page.screenshot(path=artifacts / f"{safe_name(name)}-FAILED.png")
    finally:
        context.close()


def failed_test(item: pytest.Item) -> str:
    """The test's name if its call phase failed, else ""."""
    report = getattr(item, "report_call", None)
    return item.name if report is not None and report.failed else ""


@pytest.fixture
def page(browser, request: pytest.FixtureRequest, artifacts: Path) -> Iterator:
    """A fresh page for one test (see ``new_page``)."""
    with new_page(browser, artifacts, lambda: failed_test(request.node)) as page:
        yield page


@pytest.fixture(scope="module")
def module_page(browser, request: pytest.FixtureRequest, artifacts: Path) -> Iterator:
    """One page shared by the tests of a module that use it, in order: for a sequence of steps
    on one app, where loading the app again for each step would cost a kernel start each. A
    test that fails there leaves a screenshot of the page as it was."""
    items = [i for i in request.session.items if getattr(i, "module", None) is request.module]
    with new_page(
        browser, artifacts, lambda: next(filter(None, map(failed_test, items)), "")
    ) as page:
        yield page


def safe_name(test: str) -> str:
    """A test's name as a file name."""
    return re.sub(r"[^\w.-]+", "_", test)


#: A URL of this machine: its HTTP and websocket servers.
LOCAL = re.compile(r"^(https?|wss?)://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/|$)")
#: URLs of content the page holds itself (a blob: URL carries the origin that made it).
IN_PAGE = ("data:", "about:")


def is_local(url: str) -> bool:
    """Whether a request to ``url`` stays on this machine (or inside the page)."""
    url = url.removeprefix("blob:")
    return url.startswith(IN_PAGE) or LOCAL.match(url) is not None


def outside_requests(page) -> list[str]:
    """The URLs the page requested from other machines (see ``new_page``)."""
    return [url for url in page.requests if not is_local(url)]


def record_console_error(page, msg) -> None:
    """Keep a console error, with the URL it came from: a failed request to another machine in
    ``page.remote_failures``, anything else in ``page.problems``.

    Voila's and JupyterLab's templates link Font Awesome's CSS from a CDN; offline (CI, a
    workshop behind a firewall) those requests fail with "Failed to load resource:
    net::ERR_..." and are cosmetic (the widgets bring their own icon font). The Voila tests
    name the ones they tolerate; a failed request to our own server is always a problem.
    """
    if msg.type != "error":
        return
    url = (msg.location or {}).get("url", "")
    text = f"console: {msg.text} ({url})"
    if msg.text.startswith("Failed to load resource") and url and not is_local(url):
        page.remote_failures.append(text)
    else:
        page.problems.append(text)
