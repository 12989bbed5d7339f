"""``impactlab app``: the Explorer served by Voila with impactlab's page template. The browser
tests (tests/browser/test_voila.py) start their server this way and check that the page asks no
other machine for anything; these check the command's own errors and what it ships."""

from __future__ import annotations

from impactlab.cli import APP_DATA, main

TEMPLATE = APP_DATA / "voila" / "templates" / "impactlab"


def test_app_refuses_a_missing_notebook_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no notebooks/ here
    assert main(["app"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "notebooks/01-explorer.ipynb: no such notebook" in err


def test_the_page_template_extends_voilas_lab_template_without_its_remote_links():
    page = (TEMPLATE / "index.html.j2").read_text()
    assert "extends 'voila/templates/lab/index.html.j2'" in page
    assert "'://' in line" in page  # drops every <link> to another machine
    assert '"base_template": "lab"' in (TEMPLATE / "conf.json").read_text()
