"""Airlock as a model's tool: the function-calling schema for OpenAI-style
and Anthropic-style APIs, and ``handle`` to run one call and give back the
text the model should read."""

from .errors import AirlockError, RejectedError

NAME = "run_code"
DESCRIPTION = (
    "Run a program in a fresh, isolated sandbox (gVisor, no network) and return its "
    "stdout, stderr and exit code. Nothing persists between calls: pass every file "
    "the program needs. Use it to compute, test code, or check an answer.")
# Text a model sees of each stream at most, by default: the head and the tail.
MAX_CHARS = 4000


def parameters(runtimes=None) -> dict:
    """The tool's arguments as a JSON Schema object. ``runtimes``: the
    cluster's profiles, when known, as an enum."""
    runtime = {"type": "string", "description": "Language runtime; python if not given."}
    if runtimes:
        runtime["enum"] = list(runtimes)
    else:
        runtime["description"] += " The chart's defaults are python, node and bash."
    return {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The program's source."},
            "runtime": runtime,
            "stdin": {"type": "string", "description": "Text given on standard input."},
            "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 3600,
                                "description": "Wall-clock limit from the program's start."},
        },
        "required": ["code"],
        "additionalProperties": False,
    }


def run_code_tool(flavor="openai", runtimes=None) -> dict:
    """The tool for a model API: ``"openai"`` (chat completions' function
    tools, also what most OpenAI-compatible servers take) or
    ``"anthropic"`` (the Messages API's tools)."""
    p = parameters(runtimes)
    if flavor == "openai":
        return {"type": "function",
                "function": {"name": NAME, "description": DESCRIPTION, "parameters": p}}
    if flavor == "anthropic":
        return {"name": NAME, "description": DESCRIPTION, "input_schema": p}
    raise ValueError("flavor: %r is neither 'openai' nor 'anthropic'" % (flavor,))


def _cap(text, limit):
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    return "%s\n[... %d characters cut ...]\n%s" % (text[:head], len(text) - limit,
                                                    text[-tail:])


def _arguments(arguments):
    import json

    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments)
        except ValueError as e:
            raise RejectedError("arguments: not JSON: %s" % e, "arguments") from None
    if not isinstance(arguments, dict):
        raise RejectedError("arguments: must be an object", "arguments")
    extra = set(arguments) - set(parameters()["properties"])
    if extra:
        raise RejectedError("arguments: unknown %s" % ", ".join(sorted(extra)), sorted(extra)[0])
    code = arguments.get("code")
    if not isinstance(code, str) or not code:
        raise RejectedError("code: required, a non-empty string", "code")
    kw = {}
    if arguments.get("runtime") is not None:
        kw["runtime"] = arguments["runtime"]
    if arguments.get("stdin") is not None:
        kw["stdin"] = arguments["stdin"]
    t = arguments.get("timeout_seconds")
    if t is not None:
        if isinstance(t, bool) or not isinstance(t, int):
            raise RejectedError("timeout_seconds: must be an integer", "timeout_seconds")
        kw["timeout"] = t
    return code, kw


def format_result(r, max_chars=MAX_CHARS) -> str:
    """A result as a model should read it: the end first, then each
    stream, capped (head and tail kept) and marked when cut."""
    if r.phase == "Succeeded" or (r.phase == "Failed" and r.reason == "Error"):
        head = "exit code: %s" % r.exit_code
    else:
        head = "%s: %s" % (r.reason or r.phase, r.message or "")
        if r.exit_code is not None:
            head += " (exit code %s)" % r.exit_code
    out = head + "\n"
    for key, text, cut in (("stdout", r.stdout, r.stdout_truncated),
                           ("stderr", r.stderr, r.stderr_truncated)):
        if not text and not cut:
            continue
        body = _cap(text, max_chars)
        if cut:
            body += "%s[%s was cut by the sandbox's output limit]" % (
                "" if body.endswith("\n") or not body else "\n", key)
        out += "--- %s ---\n%s" % (key, body)
        if not out.endswith("\n"):
            out += "\n"
    return out.rstrip("\n") if out == head + "\n" else out


def handle(client, arguments, max_chars=MAX_CHARS) -> str:
    """Run one ``run_code`` tool call (a dict, or the JSON string a model
    API hands back) and return the text for the model. Bad arguments and
    refusals come back as text too, so the model can correct itself."""
    try:
        code, kw = _arguments(arguments)
        r = client.run(code, **kw)
    except RejectedError as e:
        return "error: the call was refused: %s" % e
    except AirlockError as e:
        return "error: the sandbox could not run it: %s" % e
    return format_result(r, max_chars)

