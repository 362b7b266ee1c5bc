"""Node packages in their own processes, over gRPC.

``host``: the runtime's side: finds plugin packages (entry points
``switchboard.plugins``, ``$SWITCHBOARD_DATA_DIR/plugins/*/plugin.json``),
starts them, shakes hands and proxies their nodes (``RemoteNode``).
``server``: the Python SDK's side: serves an ordinary node package out of
process (``python -m runtime.plugin serve PACKAGE``).
``wire``: what both sides share: the handshake, the token, JSON coding.
The protocol itself: ``protos/switchboard/plugin/v1/plugin.proto``.
"""
