"""The everyday-SDK fixture server, split by responsibility; tests/py/sdk_conformance_fixture.py is its entry point.

Importing the package registers everything on `mcp` (one `MCPServer`). The import order below is
the order of tools/list:

* `server`: the `MCPServer`, the two tools it is built with (test_simple_text first, and the
  hand-written JSON Schema 2020-12 tool), shared helpers;
* `content`: tools that need no client input, plus resources, prompts and completion;
* `legacy`: 2025-11-25-only client input (`ctx.elicit`, `ctx.session.create_message`,
  `ctx.session.list_roots`) and logging/setLevel;
* `dual_era`: client input in both eras (`Resolve` + `Elicit`/`Sample`/`ListRoots`, and the
  hand-rolled InputRequiredResult items whose keys the suite fixes);
* `changes`: list-change triggers, resources/updated, and resources/(un)subscribe.
"""

# Importing a module registers its handlers; the order is the listing order.
from sdk_fixture import content  # noqa: F401, I001
from sdk_fixture import legacy  # noqa: F401
from sdk_fixture import dual_era  # noqa: F401
from sdk_fixture import changes  # noqa: F401
from sdk_fixture.server import mcp

__all__ = ["mcp"]
