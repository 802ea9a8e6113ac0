"""A fix-and-retry agent loop: the model writes code, Airlock runs it, the
model reads the result and tries again, until it answers in words.

Works with any OpenAI-compatible chat client (the ``openai`` package's
``OpenAI(base_url=...)``, vLLM, Ollama, LiteLLM ...):

    from openai import OpenAI
    import airlock
    answer = solve(OpenAI(), "gpt-4o-mini", airlock.Client(),
                   "What is the 20th prime? Check it by running code.")
"""
import json
import sys

import airlock

SYSTEM = ("You solve tasks by writing and running code with the run_code tool. "
          "Read its output; if it failed, fix the code and run it again. "
          "When you are sure, answer in plain words.")


def solve(llm, model, sandbox, task, max_turns=8, log=sys.stderr):
    """The model's final answer to task; each tool call runs in a fresh sandbox."""
    tool = airlock.tools.run_code_tool("openai")
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for _ in range(max_turns):
        reply = llm.chat.completions.create(model=model, messages=messages, tools=[tool])
        msg = reply.choices[0].message
        calls = msg.tool_calls or []
        messages.append({"role": "assistant", "content": msg.content or "",
                         "tool_calls": [{"id": c.id, "type": "function",
                                         "function": {"name": c.function.name,
                                                      "arguments": c.function.arguments}}
                                        for c in calls]})
        if not calls:
            return msg.content
        for c in calls:
            if c.function.name != airlock.tools.NAME:
                out = "error: no tool named %r" % c.function.name
            else:
                out = airlock.tools.handle(sandbox, c.function.arguments)
            print("--- run_code ->\n%s" % out, file=log)
            messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
    raise RuntimeError("no answer after %d turns" % max_turns)


if __name__ == "__main__":
    from openai import OpenAI  # pip install openai; OPENAI_BASE_URL for others

    model = sys.argv[1] if len(sys.argv) > 1 else "gpt-4o-mini"
    task = sys.argv[2] if len(sys.argv) > 2 else \
        "What is the sum of the first 100 primes? Compute it with code."
    print(solve(OpenAI(), model, airlock.Client(), task))
