"""airlock.tools: the schemas (checked with a JSON Schema validator),
handle() on the real cluster, and examples/agent's loop driven by a
scripted stand-in for the model."""
import importlib.util
import io
import json
import os
from types import SimpleNamespace

import jsonschema
import pytest

import airlock
from airlock import tools

from conftest import TOP


def test_openai_schema():
    t = tools.run_code_tool("openai")
    assert set(t) == {"type", "function"} and t["type"] == "function"
    assert set(t["function"]) == {"name", "description", "parameters"}
    assert t["function"]["name"] == "run_code"
    p = t["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(p)
    assert p["required"] == ["code"]
    assert set(p["properties"]) == {"code", "runtime", "stdin", "timeout_seconds"}
    v = jsonschema.Draft202012Validator(p)
    assert v.is_valid({"code": "print(1)"})
    assert v.is_valid({"code": "x", "runtime": "bash", "stdin": "", "timeout_seconds": 5})
    assert not v.is_valid({})
    assert not v.is_valid({"code": 1})
    assert not v.is_valid({"code": "x", "timeout_seconds": 0})
    assert not v.is_valid({"code": "x", "timeout_seconds": 3601})
    assert not v.is_valid({"code": "x", "shell": True})


def test_anthropic_schema_and_runtimes():
    t = tools.run_code_tool("anthropic", runtimes=["python", "bash"])
    assert set(t) == {"name", "description", "input_schema"}
    s = t["input_schema"]
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["properties"]["runtime"]["enum"] == ["python", "bash"]
    v = jsonschema.Draft202012Validator(s)
    assert v.is_valid({"code": "x", "runtime": "bash"})
    assert not v.is_valid({"code": "x", "runtime": "cobol"})
    with pytest.raises(ValueError):
        tools.run_code_tool("gemini")


def test_handle(client):
    assert tools.handle(client, '{"code": "print(1)"}') == "exit code: 0\n--- stdout ---\n1\n"
    assert tools.handle(client, {"code": "echo e >&2; exit 2", "runtime": "bash"}) == \
        "exit code: 2\n--- stderr ---\ne\n"
    assert tools.handle(client, {"code": "print(input())", "stdin": "hey\n"}) == \
        "exit code: 0\n--- stdout ---\nhey\n"
    assert tools.handle(client, {"code": "while True: pass", "timeout_seconds": 1}) == \
        "DeadlineExceeded: killed at its 1000 ms deadline (exit code 137)"
    # Head and tail kept, the cut counted: 10001 characters, 100 shown.
    out = tools.handle(client, {"code": "print('x' * 5000 + 'y' * 5000)"}, max_chars=100)
    assert out == ("exit code: 0\n--- stdout ---\n" + "x" * 75 +
                   "\n[... 9901 characters cut ...]\n" + "y" * 24 + "\n")


def test_handle_refusals(client):
    assert tools.handle(client, "{not json").startswith(
        "error: the call was refused: arguments: not JSON: ")
    assert tools.handle(client, {"runtime": "python"}) == \
        "error: the call was refused: code: required, a non-empty string"
    assert tools.handle(client, {"code": "x", "rm": "-rf"}) == \
        "error: the call was refused: arguments: unknown rm"
    assert tools.handle(client, {"code": "x", "timeout_seconds": "5"}) == \
        "error: the call was refused: timeout_seconds: must be an integer"
    out = tools.handle(client, {"code": "x", "runtime": "cobol"})
    assert out.startswith("error: the call was refused: run-") and "spec.runtime" in out


def load_example():
    path = os.path.join(TOP, "examples", "agent", "loop.py")
    spec = importlib.util.spec_from_file_location("agent_loop", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class ScriptedModel:
    """An OpenAI-compatible chat client whose replies are written in
    advance: a buggy program, its fix, then the answer."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.seen = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, model, messages, tools):
        self.seen.append([dict(m) for m in messages])
        assert tools == [airlock.tools.run_code_tool("openai")]
        content, code = self.replies.pop(0)
        calls = []
        if code is not None:
            calls = [SimpleNamespace(id="call-%d" % len(self.seen), function=SimpleNamespace(
                name="run_code", arguments=json.dumps({"code": code})))]
        msg = SimpleNamespace(content=content, tool_calls=calls)
        return SimpleNamespace(choices=[SimpleNamespace(message=msg)])


def test_example_loop(client):
    loop = load_example()
    model = ScriptedModel([
        (None, "print(sum(primes[:10]))"),
        ("Let me define them.", "primes = [p for p in range(2, 30) "
                                "if all(p % d for d in range(2, p))]\nprint(sum(primes[:10]))"),
        ("The sum of the first 10 primes is 129.", None),
    ])
    log = io.StringIO()
    answer = loop.solve(model, "stand-in", client, "Sum the first 10 primes.", log=log)
    assert answer == "The sum of the first 10 primes is 129."
    assert model.replies == []
    tool_msgs = [m for m in model.seen[-1] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call-1", "call-2"]
    assert tool_msgs[0]["content"].startswith("exit code: 1\n--- stderr ---\nTraceback")
    assert "NameError: name 'primes' is not defined" in tool_msgs[0]["content"]
    assert tool_msgs[1]["content"] == "exit code: 0\n--- stdout ---\n129\n"
    assert log.getvalue().count("--- run_code ->") == 2


def test_example_loop_gives_up(client):
    loop = load_example()
    model = ScriptedModel([(None, "print(1)")] * 2)
    with pytest.raises(RuntimeError, match="no answer after 2 turns"):
        loop.solve(model, "stand-in", client, "loop forever", max_turns=2, log=io.StringIO())
