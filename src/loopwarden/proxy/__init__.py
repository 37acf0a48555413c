"""The guard on the wire: an OpenAI-compatible proxy (`loopwarden proxy --upstream URL`) that
applies loopwarden's ladder, detectors and budgets to any agent that can be pointed at a base URL.

The client executes the tools, so the proxy cannot run or skip them; what it can do is shape
what goes upstream and what comes back:

    client request ──► history.py   the conversation, its current task and its tool results
                  ──► resume.py    the run paused on the previous request, if its history matches
                  ──► replay.py    a real loopwarden run replayed over that history: its verdicts,
                                   nudges, narrowing and stops are exactly the in-process ones
                  ──► upstream.py  the request as the run would send it (nudges inserted, tools
                                   narrowed, tool_choice forced), forwarded to the real endpoint
    upstream reply ◄── app.py      passed through untouched, or replaced by a stop message when
                                   the run stops on it; every exchange stored as a run

The guard's state is derived from the request itself: every request carries the calls and results
before it (no session affinity; a restart loses nothing). To keep a long conversation cheap, the
run is paused where the client takes over and resumed by the next request whose history matches
(resume.py); on a miss it is replayed in full, with the same verdicts.
"""
