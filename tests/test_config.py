"""[tool.tilelint] discovery, validation and Settings (server/config.py)."""

from pathlib import Path

import pytest

from tilelint.server.config import (
    Config,
    ConfigCache,
    ConfigError,
    Matcher,
    compile_pattern,
    config_for,
    find_config,
    load_config,
    parse_binding,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_pyproject(tmp_path):
    f = write(tmp_path / "k.py", "import tilelang\n")
    cfg = config_for(f)
    assert cfg.targets == ("sm_80",)
    s = cfg.settings_for(f)
    assert s.target == "sm_80" and s.select == () and s.ignore == () and s.bindings == ()


def test_nearest_pyproject_with_table_wins(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.tilelint]\ntarget = "sm_90"\n')
    # A nearer pyproject without [tool.tilelint] is passed over (like ruff).
    write(tmp_path / "pkg" / "pyproject.toml", '[project]\nname = "x"\n')
    f = write(tmp_path / "pkg" / "sub" / "k.py", "")
    assert find_config(f) == tmp_path / "pyproject.toml"
    assert config_for(f).target == "sm_90"
    # A nearer one with the table wins.
    write(tmp_path / "pkg" / "pyproject.toml", '[tool.tilelint]\ntarget = "sm86"\n')
    assert config_for(f).target == "sm_86"  # "sm86" normalised


def test_full_table(tmp_path):
    pp = write(tmp_path / "pyproject.toml", """
[tool.tilelint]
targets = ["sm_80", "sm_90"]
select = ["TL1", "TL2"]
ignore = ["TL203"]
exclude = ["generated/"]
inlay-hints = false
verify = true

[tool.tilelint.per-file-ignores]
"tests/**" = ["TL002"]
"bench_*.py" = ["TL201"]

[tool.tilelint.bindings]
block_K = 64
dtype = "bfloat16"

[tool.tilelint.bindings.matmul]
num_stages = 4
""")
    cfg = load_config(pp)
    assert cfg.targets == ("sm_80", "sm_90")
    assert cfg.select == ("TL1", "TL2")
    assert cfg.inlay_hints is False and cfg.verify is True
    assert cfg.bindings == (("block_K", 64), ("dtype", "bfloat16"))
    assert cfg.kernel_bindings == (("matmul", (("num_stages", 4),)),)
    s = cfg.settings_for(tmp_path / "tests" / "unit" / "test_k.py", "sm_90")
    assert s.target == "sm_90"
    assert s.ignore == ("TL203", "TL002")
    assert s.kernel_bindings == (("matmul", (("num_stages", 4),)),)
    # bench_*.py has no slash: it matches at any depth; tests/** only under tests/.
    assert cfg.settings_for(tmp_path / "a" / "bench_gemm.py").ignore == ("TL203", "TL201")
    assert cfg.settings_for(tmp_path / "other" / "tests" / "k.py").ignore == ("TL203",)
    assert cfg.is_excluded(tmp_path / "generated" / "k.py")
    assert not cfg.is_excluded(tmp_path / "src" / "k.py")


@pytest.mark.parametrize("body, key", [
    ('target = "sm_70"', "target"),
    ('targets = "sm_80"', "targets"),
    ('select = ["tl-1"]', "select"),
    ('ignore = [101]', "ignore"),
    ('inlay-hints = "yes"', "inlay-hints"),
    ('verify = 1', "verify"),
    ('exlcude = ["x"]', "exlcude"),
    ('bindings = { "block K" = 3 }', "bindings.block K"),
    ('bindings = { block_K = { a = {} } }', "bindings.block_K.a"),
    ('per-file-ignores = { "x.py" = ["??"] }', "per-file-ignores.x.py"),
])
def test_invalid_config_names_the_key(tmp_path, body, key):
    pp = write(tmp_path / "pyproject.toml", f"[tool.tilelint]\n{body}\n")
    with pytest.raises(ConfigError) as ei:
        load_config(pp)
    msg = str(ei.value)
    assert f"`{key}`" in msg
    assert str(pp) in msg


def test_target_and_targets_conflict(tmp_path):
    pp = write(tmp_path / "pyproject.toml", '[tool.tilelint]\ntarget = "sm_80"\ntargets = ["sm_90"]\n')
    with pytest.raises(ConfigError, match="either `target` or `targets`"):
        load_config(pp)


def test_invalid_toml(tmp_path):
    pp = write(tmp_path / "pyproject.toml", "[tool.tilelint\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(pp)


def test_snake_case_keys_accepted(tmp_path):
    pp = write(tmp_path / "pyproject.toml", "[tool.tilelint]\ninlay_hints = false\n")
    assert load_config(pp).inlay_hints is False


def test_overrides():
    cfg = Config(targets=("sm_80",), select=("TL1",), ignore=("TL203",), bindings=(("a", 1),))
    o = cfg.with_overrides(targets=["sm90"], ignore=["tl002"], bindings=[("a", 2), ("b", 3)],
                           extend_select=["TL900"])
    assert o.targets == ("sm_90",)
    assert o.ignore == ("TL203", "TL002")
    assert o.select == ("TL1",) and o.extend_select == ("TL900",)
    assert o.settings_for(None).select == ("TL1", "TL900")
    # --select starts over: the file's extend-select goes with the file's select.
    assert Config(extend_select=("TL900",)).with_overrides(select=["TL2"]).extend_select == ()
    assert dict(o.bindings) == {"a": 2, "b": 3}
    with pytest.raises(ConfigError, match="--target"):
        cfg.with_overrides(targets=["volta"])


def test_parse_binding():
    assert parse_binding("num_stages=3") == ("num_stages", 3)
    assert parse_binding("scale=0.5") == ("scale", 0.5)
    assert parse_binding("dtype=float16") == ("dtype", "float16")
    assert parse_binding("dtype='float16'") == ("dtype", "float16")
    assert parse_binding("flag=True") == ("flag", True)
    assert parse_binding("shape=(1, 2)") == ("shape", (1, 2))
    for bad in ("=3", "3x=1", "nonsense", "a="):
        with pytest.raises(ConfigError):
            parse_binding(bad)


def test_config_cache_reads_each_pyproject_once(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", '[tool.tilelint]\ntarget = "sm_89"\n')
    a = write(tmp_path / "a" / "k.py", "")
    b = write(tmp_path / "b" / "k.py", "")
    import tilelint.server.config as cm
    calls = []
    real = cm.load_config
    monkeypatch.setattr(cm, "load_config", lambda p: calls.append(p) or real(p))
    cache = ConfigCache()
    assert cache.for_path(a).target == "sm_89"
    assert cache.for_path(b).target == "sm_89"
    assert len(calls) == 1
    assert ConfigCache(isolated=True).for_path(a).target == "sm_80"


# --------------------------------------------------------------------------
# gitignore-style patterns
# --------------------------------------------------------------------------


def ignored(patterns, rel, base="/r", is_dir=False):
    m = Matcher(p for p in (compile_pattern(x, base) for x in patterns) if p)
    return m.ignored(f"{base}/{rel}", is_dir=is_dir)


@pytest.mark.parametrize("patterns, rel, is_dir, expected", [
    (["*.py"], "a/b/c.py", False, True),            # no slash: any depth
    (["/c.py"], "a/c.py", False, False),            # leading slash: anchored
    (["/c.py"], "c.py", False, True),
    (["a/c.py"], "x/a/c.py", False, False),          # inner slash: anchored
    (["build/"], "build", False, False),             # dir-only pattern vs a file
    (["build/"], "build/x.py", False, True),         # ...covers what is inside the dir
    (["build/"], "src/build/x.py", False, True),
    (["**/gen"], "a/b/gen/x.py", False, True),
    (["a/**/k.py"], "a/k.py", False, True),
    (["a/**/k.py"], "a/x/y/k.py", False, True),
    (["a/**"], "a/x.py", False, True),
    (["a/**"], "b/a/x.py", False, False),
    (["k?.py"], "k1.py", False, True),
    (["k?.py"], "k12.py", False, False),
    (["k[0-9].py"], "k7.py", False, True),
    (["k[!0-9].py"], "k7.py", False, False),
    (["*.py", "!keep.py"], "keep.py", False, False),  # negation, last match wins
    (["gen/", "!gen/keep.py"], "gen/keep.py", False, True),  # parent dir excluded: stays
    (["# comment", ""], "x.py", False, False),
    (["\\#x.py"], "#x.py", False, True),
])
def test_gitignore_patterns(patterns, rel, is_dir, expected):
    assert ignored(patterns, rel, is_dir=is_dir) is expected


def test_pattern_outside_base_never_matches():
    assert ignored(["*.py"], "../elsewhere/x.py") is False


def test_command_line_binding_beats_per_kernel_table() -> None:
    """Like ruff, the command line wins over the file, per-kernel tables too."""
    from tilelint.server.config import Config
    cfg = Config(kernel_bindings=(("gemm", (("num_stages", 2), ("block_K", 64))),))
    out = cfg.with_overrides(bindings=[("num_stages", 4)])
    assert dict(out.bindings)["num_stages"] == 4
    assert out.kernel_bindings == (("gemm", (("block_K", 64),)),)


# --------------------------------------------------------------------------
# extend-select: added to select, or to the default set
# --------------------------------------------------------------------------


def test_extend_select_adds_to_the_default_set():
    """The default set is every code but TL900 (unused noqa, off by default:
    docs/rules/TL900.md); ``extend-select`` without ``select`` adds to it,
    it does not replace it."""
    from tilelint.analysis.pipeline import selected
    plain = Config().settings_for(None)
    assert selected("TL101", plain) and not selected("TL900", plain)
    s = Config(extend_select=("TL900",)).settings_for(None)
    assert selected("TL101", s) and selected("TL201", s) and selected("TL900", s)
    s = Config(extend_select=("TL9",)).settings_for(None)  # a prefix that covers TL900
    assert selected("TL900", s) and selected("TL002", s)
    s = Config(extend_select=("TL203",)).settings_for(None)  # on by default already
    assert selected("TL203", s) and not selected("TL900", s)
    s = Config(select=("TL1",), extend_select=("TL900",)).settings_for(None)
    assert selected("TL101", s) and selected("TL900", s) and not selected("TL201", s)
    # per-file-ignores still beat extend-select
    s = Config(root=Path("/x"), extend_select=("TL900",),
               per_file_ignores=(("k.py", ("TL900",)),)).settings_for("/x/k.py")
    assert not selected("TL900", s) and selected("TL101", s)


# A duplicate order (TL101 on line 14) and a noqa that suppresses nothing (TL900 on line 20).
DUP_ORDER = (Path(__file__).parent / "fixtures" / "config" / "dup_order_noqa.py").read_text()


def test_cli_extend_select_keeps_the_default_rules(tmp_path, capsys):
    """Two statements with order 0 (lines 13 and 14) are what tilelang 0.1.15's
    InjectSoftwarePipeline rejects ("Two statements in the software pipeline
    cannot have the same order", NOTES.md): TL101 on the second.  The noqa on
    line 20 suppresses nothing there: TL900 once selected.  Before, a lone
    ``extend-select`` replaced the default set and TL101 was lost."""
    import json

    from tilelint.server import cli
    f = write(tmp_path / "k.py", DUP_ORDER)
    write(tmp_path / "pyproject.toml", '[tool.tilelint]\nextend-select = ["TL900"]\n')
    rc = cli.main(["check", "--no-progress", "--format", "json", str(f)])
    found = sorted((d["code"], d["line"]) for d in json.loads(capsys.readouterr().out))
    assert rc == 1
    assert found == [("TL101", 14), ("TL900", 20)]


# --------------------------------------------------------------------------
# Editor settings: an overlay on the loaded configuration
# --------------------------------------------------------------------------


def test_overlay_applies_like_the_command_line(tmp_path):
    from tilelint.server.config import overlay
    pp = write(tmp_path / "pyproject.toml", """
[tool.tilelint]
target = "sm_86"
select = ["TL1"]
extend-select = ["TL900"]
ignore = ["TL203"]
exclude = ["generated/"]
per-file-ignores = { "tests/**" = ["TL002"] }
per-file-targets = { "hopper/**" = ["sm_90"] }

[tool.tilelint.bindings]
block_K = 64

[tool.tilelint.bindings.gemm]
num_stages = 2
block_M = 128
""")
    cfg = load_config(pp)
    warnings = []
    out = overlay(cfg, {"target": "sm_89", "ignore": ["TL2"],
                        "bindings": {"num_stages": 4, "gemm": {"block_M": 64}},
                        "all_bindings": True, "inlay-hints": False}, warnings.append)
    assert warnings == []
    # target: configuration level; per-file-targets still first
    assert out.targets_for(tmp_path / "src" / "k.py", "") == ("sm_89",)
    assert out.targets_for(tmp_path / "hopper" / "k.py", "") == ("sm_90",)
    s = out.settings_for(tmp_path / "tests" / "k.py", source="")
    assert s.target == "sm_89"
    assert s.select == ("TL1", "TL900")                  # file's select and extend-select kept
    assert s.ignore == ("TL203", "TL2", "TL002")          # ignore adds; per-file-ignores kept
    assert dict(s.bindings) == {"block_K": 64, "num_stages": 4}
    assert s.kernel_bindings == (("gemm", (("block_M", 64),)),)  # editor beats the table
    assert s.all_bindings and out.inlay_hints is False
    assert out.is_excluded(tmp_path / "generated" / "k.py")
    # select replaces, and drops the file's extend-select
    assert overlay(cfg, {"select": ["TL2"]}).settings_for(None).select == ("TL2",)
    assert overlay(cfg, {"extend-select": "TL203"}).settings_for(None).select == (
        "TL1", "TL900", "TL203")


def test_overlay_reports_bad_values_and_keeps_the_rest():
    from tilelint.server.config import overlay
    warnings = []
    out = overlay(Config(), {"target": "volta", "select": ["TL999"], "ignore": "TL2",
                             "verify": "yes", "colour": "red", "bindings": {"block K": 1}},
                  warnings.append)
    assert out.target == "sm_80" and out.select == () and out.ignore == ("TL2",)
    assert out.verify is False and out.bindings == ()
    text = "\n".join(warnings)
    for needle in ("`target`", "unknown target 'volta'", "`select`", "unknown rule code 'TL999'",
                   "`verify`", "`colour`", "`bindings.block K`"):
        assert needle in text, (needle, text)
    assert len(warnings) == 5


def test_config_cache_reports_a_broken_pyproject_and_uses_defaults(tmp_path):
    pp = write(tmp_path / "pyproject.toml", '[tool.tilelint]\ntarget = "sm_7"\n')
    f = write(tmp_path / "k.py", "")
    with pytest.raises(ConfigError):
        ConfigCache().for_path(f)
    errors = []
    cache = ConfigCache(on_error=errors.append)
    cfg = cache.for_path(f)
    assert cfg.target == "sm_80" and cfg.root == tmp_path
    assert len(errors) == 1 and "unknown target 'sm_7'" in str(errors[0]) and str(pp) in str(errors[0])
    # fixed on disk: clear() reads it again
    write(pp, '[tool.tilelint]\ntarget = "sm_90"\n')
    assert cache.for_path(f).target == "sm_80"
    cache.clear()
    assert cache.for_path(f).target == "sm_90"
