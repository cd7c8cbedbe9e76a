"""``python -m tagtorch.export ... --option KEY=VALUE``: plain YAML only, each refusal one line.

A value is read with ``yaml.safe_load`` and must be plain data (numbers, strings, lists,
mappings, no repeated alias); a config node (``_target_``) is refused before anything is built;
an option the loader does not take is named. Every refusal is one line on stderr, exit status 2.
"""

from __future__ import annotations

import pytest

from tagtorch.errors import ConfigError
from tagtorch.export import _options, main


@pytest.mark.parametrize(("pair", "message"), [
    ("noequals", "config key --option='noequals': expected KEY=VALUE"),
    ("=5", "config key --option='=5': expected KEY=VALUE"),
    ("x=!!python/object/apply:os.system ['touch pwned']", "found a python tag"),
    ("x=!!python/name:os.system", "found a python tag"),
    ("x=[1", "found YAML it cannot parse (while parsing a flow sequence)"),
    ("x=" + "[" * 50_000, "found YAML it cannot parse (maximum recursion depth"),
    ("x=" + "9" * 5000, "found YAML it cannot parse (Exceeds the limit (4300 digits)"),
    ("x=2020-01-01", "found a date"),
    ("x=!!binary aGk=", "found a bytes"),
    ("x=!!set {a}", "found a set"),
    ("x=&a [*a]", "found an alias repeating a list or mapping (or a recursive one)"),
    ("x={a: &b [1, 2], c: *b}", "found an alias repeating a list or mapping"),
    ("_target_=os.system", "config key --option _target_='os.system': expected a loader "
                           "setting, not a config node"),
    ("x={_target_: os.getcwd}", "expected a loader setting, not a config node"),
    ("x=[{_partial_: true}]", "expected a loader setting, not a config node"),
])
def test_an_option_that_is_not_plain_data_is_refused_naming_it(tmp_path, monkeypatch, pair,
                                                                 message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        _options([pair])
    text = str(refused.value)
    assert message in text and "\n" not in text and len(text) < 300, text
    assert not (tmp_path / "pwned").exists()  # nothing constructed, nothing run


def test_plain_options_are_read_as_yaml():
    assert _options(["n_objects=500", "name=my data", "columns={object: item_id}",
                     "ks=[1, 5]", "rate=0.5", "flag=true", "none=null"]) == {
        "n_objects": 500, "name": "my data", "columns": {"object": "item_id"}, "ks": [1, 5],
        "rate": 0.5, "flag": True, "none": None}


@pytest.mark.parametrize(("argv", "message"), [
    (["--option", "x=!!python/object/apply:os.system ['touch pwned']"],
     "error: config key --option x=\"!!python/object/apply:os.system ['touch pwned']\": "
     "expected a plain YAML value (a number, a string, a list, a mapping), found a python tag"),
    (["--option", "bogus=1"],
     "error: config key --option bogus=1: expected a setting the loader of 'synthetic' takes "
     "(generate_folksonomy() got an unexpected keyword argument 'bogus')"),
    (["--option", "n_objects=abc"],
     "error: config key --option n_objects='abc': expected a setting the loader of 'synthetic' "
     "takes ('<' not supported between instances of 'str' and 'int')"),
    (["--name", "../escaped"],
     "error: config key --name='../escaped': expected a file name's stem of 1 to 100 ASCII "
     "letters, digits, '_', '-', '.' or '+', starting with a letter, digit or '_', without "
     "'..' (it names the run's files)"),
])
def test_the_command_refuses_in_one_line_with_status_2(tmp_path, monkeypatch, capsys, argv,
                                                        message):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(["tagrec", "synthetic", str(out), *argv]) == 2
    captured = capsys.readouterr()
    assert captured.err == message + "\n" and not captured.out
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "escaped.txt").exists()
    assert not out.exists()  # refused before anything is written
