"""CEL authorization: rules, load-time checks, fail-closed evaluation, the decision cache."""

from __future__ import annotations

import logging

import pytest

from hopline.compose.policy import build
from hopline.layers.policy.visibility import surface_key
from hopline.config.load import ConfigError, parse_config
from hopline.context import ANONYMOUS, Principal
from hopline.layers.policy.cel import CelPolicy, RuleError, compile_rule, compile_rules
from hopline.pipeline import Item

BACKENDS = "backends:\n  gh: {command: python}\n  jira: {command: python}\n"


def policy(*rules: str, **kw) -> CelPolicy:
    return CelPolicy(compile_rules([(f"rules[{i}]", r) for i, r in enumerate(rules)]), **kw)


def who(sub: str = "alice", **claims) -> Principal:
    return Principal(sub, claims={"sub": sub, **claims}, issuer="https://idp")


def tool(name: str, backend: str = "gh") -> Item:
    return Item("tool", backend, name, {"name": name})


def load(yaml: str):
    return parse_config(BACKENDS + yaml)


# -- what rules can say ---------------------------------------------------------------------------
def test_claims_and_tool_names_decide_visibility():
    p = policy('jwt.role == "admin"', 'mcp.tool.name.startsWith("read_") && "dev" in jwt.groups')
    admin, dev, guest = who("a", role="admin", groups=[]), who("d", role="user", groups=["dev"]), who("g", role="user", groups=["sales"])
    assert p.visible(admin, tool("delete_repo")) and p.visible(admin, tool("read_file"))
    assert p.visible(dev, tool("read_file")) and not p.visible(dev, tool("delete_repo"))
    assert not p.visible(guest, tool("read_file"))


def test_backend_method_kind_and_other_item_kinds():
    p = policy('mcp.backend == "jira" && mcp.method == "tools/call"', 'mcp.prompt.name == "summary"', 'mcp.resource.uri.startsWith("file:///pub/")')
    u = who()
    assert p.visible(u, tool("x", "jira")) and not p.visible(u, tool("x", "gh"))
    assert p.visible(u, Item("prompt", "gh", "summary", {})) and not p.visible(u, Item("prompt", "gh", "other", {}))
    assert p.visible(u, Item("resource", "gh", "file:///pub/a", {})) and not p.visible(u, Item("resource", "gh", "file:///etc/passwd", {}))
    assert p.visible(u, Item("resourceTemplate", "gh", "file:///pub/{x}", {}))
    kinds = policy('mcp.kind == "prompt"')
    assert kinds.visible(u, Item("prompt", "gh", "p", {})) and not kinds.visible(u, tool("p"))


def test_a_rule_naming_tools_allows_no_prompt_and_is_not_an_error(caplog):
    p = policy('mcp.tool.name != "rm"', 'mcp.tool.name == "a" || mcp.prompt.name == "b"')
    u = who()
    with caplog.at_level(logging.WARNING, "hopline.policy"):
        assert p.visible(u, tool("ls"))
        assert not p.visible(u, Item("prompt", "gh", "ls", {}))  # the first rule is about tools only
        assert p.visible(u, Item("prompt", "gh", "b", {}))  # the second names both kinds
        assert not p.visible(u, tool("rm"))
    assert caplog.records == []


def test_has_string_functions_lists_and_macros():
    p = policy('has(jwt.team) && jwt.team.endsWith("-eng")', 'jwt.groups.exists(g, g.startsWith("ops-")) && mcp.tool.name.matches("^restart_[a-z]+$")',
               'size(jwt.groups) > 3', 'mcp.tool.name in ["status", "health"]', 'mcp.tool.name.contains("report")')
    assert p.visible(who(team="web-eng", groups=[]), tool("anything"))
    assert p.visible(who(groups=["ops-db"]), tool("restart_db")) and not p.visible(who(groups=["ops-db"]), tool("restart_DB"))
    assert p.visible(who(groups=["a", "b", "c", "d"]), tool("x"))
    assert p.visible(who(groups=[]), tool("health")) and p.visible(who(groups=[]), tool("weekly_report"))
    assert not p.visible(who(groups=["web"]), tool("deploy"))


def test_no_rules_means_no_layer_and_everything_visible():
    assert build(load("")) == ([], [])
    assert build(load("policy: {}\n")) == ([], [])
    assert policy().visible(ANONYMOUS, tool("x")) is False  # a policy object with no rules allows nothing…
    surface, calls = build(load("policy: {rules: ['true']}\n"))  # …so build only makes one from rules
    assert isinstance(surface[0], CelPolicy) and surface[0].visible(ANONYMOUS, tool("x"))


# -- rejected when the configuration loads --------------------------------------------------------
@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ('mcp.tool.arguments.path == "/etc"', "mcp.tool.arguments.path`, which is known only when a call is made"),
        ('has(mcp.tool.arguments)', "known only when a call is made"),
        ('mcp.tool._meta.x == 1', "known only when a call is made"),
        ('mcp.tool.description.contains("x")', "not a field rules can use"),
        ('mcp.session == "x"', "`mcp.session`, which is not a field"),
        ('mcp["tool"] == 1', "as a whole or by index"),
        ('"tool" in mcp', "as a whole or by index"),
        ('request.user == "x"', "refers to 'request'"),
        ('jwt.role == "a" && user == "b"', "refers to 'user'"),
        ('[1].exists(a, [2].exists(b, [3].exists(c, a == c)))', "nests more than 2 comprehensions"),
        ('jwt.groups.exists(jwt, jwt == "x")', "comprehension variable"),
        ('jwt.role ==', "is not valid CEL (at 1:12"),
        ('  ', "is empty"),
        ('jwt.x == "' + "a" * 5000 + '"', "longer than 4096"),
    ],
)
def test_unusable_rules_are_refused_naming_the_rule(expr, message):
    with pytest.raises(RuleError, match=message.replace("(", r"\(").replace("[", r"\[")):
        compile_rule(expr)
    with pytest.raises(RuleError, match=r"^rule mine "):
        compile_rules([("mine", expr)])


def test_config_errors_name_the_rule_position_and_name():
    with pytest.raises(ConfigError) as err:
        load("policy:\n  rules:\n    - 'true'\n    - 'mcp.tool.arguments.x == 1'\n    - {name: readers, expr: 'request.x'}\n")
    problems = dict(err.value.problems)
    assert "policy.rules[1]" in problems and "known only when a call is made" in problems["policy.rules[1]"]
    assert problems["policy.rules[2].expr"].startswith("rule 'readers' refers to 'request'")
    assert "policy.rules[0]" not in problems


def test_allowed_references_pass():
    for expr in ['jwt.groups.exists(g, g == "x") && mcp.tool.name == "a"', 'type(jwt.n) == int', '[1, 2].map(x, x * 2).size() == 2',
                 'jwt["https://example.com/roles"] == "x"', "r'raw mcp.tool.arguments' == jwt.s", '"mcp.tool.arguments" == jwt.s',
                 'has(mcp.tool) && mcp.tool.name == "x"', 'mcp.kind == "tool" // mcp.tool.arguments in a comment']:
        compile_rule(expr)


def test_analysis_records_claims_and_kinds():
    assert compile_rule('jwt.a == 1 && has(jwt.b) && jwt.c.exists(x, x == jwt.d.e)')[1].claims == {"a", "b", "c", "d"}
    assert compile_rule('"x" in jwt')[1].claims is None
    assert compile_rule('jwt["x-y"] == 1')[1].claims is None
    assert compile_rule('mcp.tool.name == "a" || mcp.resource.uri == "b"')[1].kinds == {"tool", "resource"}
    assert compile_rule('mcp.backend == "a"')[1].kinds is None


# -- fail closed ---------------------------------------------------------------------------------------
def test_evaluation_errors_deny_and_are_logged_once(caplog):
    p = policy('jwt.role == "admin"', '"ops" in jwt.team', 'jwt.level', 'mcp.tool.name == "open"')
    with caplog.at_level(logging.WARNING, "hopline.policy"):
        for i in range(50):
            u = who(f"user{i}", team="ops", level="high")  # no role claim; team is a string; level not a bool
            assert not p.visible(u, tool(f"t{i}"))
            assert p.visible(u, tool("open"))  # a failing rule does not stop a later one from allowing
    failures = [r.getMessage() for r in caplog.records]
    assert len(failures) == 3, failures
    assert any("rules[0]" in m and "KeyError" in m for m in failures)
    assert any("rules[1]" in m for m in failures) and any("rules[2]" in m and "not a bool" in m for m in failures)
    assert all("fail closed" in m for m in failures)


def test_claims_of_unexpected_types_fail_closed():
    p = policy('"admin" in jwt.roles', 'jwt.level > 3')
    assert p.visible(who(roles=["admin"], level=1), tool("x"))
    assert not p.visible(who(roles="admin", level="9"), tool("x"))  # string instead of list / int
    assert p.visible(who(roles={"admin": True}, level=None), tool("x"))  # `in` on a map is key membership, as CEL says
    assert not p.visible(who(level=[5]), tool("x"))


def test_anonymous_callers_see_only_what_rules_without_claims_allow():
    p = policy('has(jwt.sub) && jwt.sub == "alice"', 'mcp.tool.name == "public"')
    assert p.visible(ANONYMOUS, tool("public")) and not p.visible(ANONYMOUS, tool("private"))


# -- the decision cache ----------------------------------------------------------------------------------
def test_decisions_are_cached_per_relevant_claims():
    p = policy('jwt.role == "admin"', '"dev" in jwt.groups && mcp.tool.name == "build"')
    tools = [tool(f"t{i}") for i in range(500)] + [tool("build")]
    alice = who("alice", role="user", groups=["dev"], iat=1)
    assert [t.name for t in tools if p.visible(alice, t)] == ["build"]
    first = p.evaluations
    assert first >= len(tools)
    assert [t.name for t in tools if p.visible(alice, t)] == ["build"]
    assert p.evaluations == first  # a known identity costs lookups only
    again = who("alice", role="user", groups=["dev"], iat=2, jti="other")  # a new token, same relevant claims
    assert [t.name for t in tools if p.visible(again, t)] == ["build"] and p.evaluations == first
    bob = who("bob", role="user", groups=["dev"])  # someone else with equal claims shares the decisions
    assert p.visible(bob, tool("build")) and p.evaluations == first
    promoted = who("alice", role="admin", groups=["dev"])  # same subject, other claims: decided afresh
    assert p.visible(promoted, tool("t1")) and p.evaluations > first


def test_claims_are_typed_in_the_cache_key():
    p = policy("jwt.admin == true")
    assert p.visible(who(admin=True), tool("x"))
    assert not p.visible(who(admin=1), tool("x"))
    assert p.decision_key(who(admin=True)) != p.decision_key(who(admin=1))
    assert p.decision_key(who("a", admin=True, other=1)) == p.decision_key(who("b", admin=True, other=2))


def test_rules_only_see_referenced_claims():
    p = policy('jwt.role == "x"', 'has(jwt.email)')  # `email` referenced: present when the token has it
    assert p.visible(who(role="y", email="a@b"), tool("t"))
    whole = policy('"secret_flag" in jwt')  # the whole claim set when a rule asks for it
    assert whole.visible(who(secret_flag=1), tool("t")) and not whole.visible(who(), tool("t"))


def test_the_cache_is_bounded():
    p = policy('mcp.tool.name.size() > 3', cache_size=16)
    for i in range(200):
        p.visible(who(f"u{i}", x=i), tool(f"tool{i}"))
    assert len(p._cache) <= 16 and len(p._idents) <= 16
    assert p.visible(who("u0", x=0), tool("tool0"))  # evicted entries are decided again, identically


def test_surface_key_follows_claims_and_is_stable():
    surface, _ = build(load("policy: {rules: ['jwt.role == \"admin\"']}\n"))
    a1, a2 = who("a", role="admin", n=1), who("a", role="admin", n=2)
    assert surface_key(surface, a1) == surface_key(surface, a2)
    assert surface_key(surface, a1) != surface_key(surface, who("a", role="user"))


def test_list_decisions_are_audited_once_when_asked(audit):
    p = policy('jwt.role == "admin"', cache_size=100, audit=audit.log)
    u = who("alice", role="user", token_like="x")
    for _ in range(3):
        p.visible(u, tool("secret"))
    p.visible(who("root", role="admin"), tool("secret"))
    recs = audit.records
    assert [(r["event"], r["decision"], r["principal"]) for r in recs] == [("visibility", "hide", "alice"), ("visibility", "allow", "root")]
    assert recs[1]["reason"] == "rule rules[0]" and recs[0]["target"] == "secret" and recs[0]["backend"] == "gh"
