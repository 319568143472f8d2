"""The catalog: every setting of warmkernel, declared once, in the order `--help`, `warmkernel
config` and the README's table show them. The flags, the variables, the file keys, the `Settings`
defaults and the hello's reply options are read from it."""

from __future__ import annotations

from types import MappingProxyType

from warmkernel.settings.setting import Setting
from warmkernel.settings.value_kinds import (
    ASSIGNMENT,
    COUNT,
    DIRECTORY,
    DURATION,
    FILE,
    FLAG,
    PORT,
    POSITIVE,
    POSITIVE_SIZE,
    SECONDS,
    SIZE,
    TEXT,
    Choice,
)

MEMORY_GRACE_S = 5.0
"""How long a kernel may stay above `--max-kernel-memory` after its cell was interrupted."""

CATALOG = (
    Setting(
        flag="--python",
        dest="python",
        default="auto",
        scope="kernel",
        kind=TEXT,
        metavar="PATH",
        help="the interpreter that runs the kernel (it needs `ipykernel`); `auto`: the project's environment "
        "($VIRTUAL_ENV, .venv or venv up to the repository root, a uv project, $CONDA_PREFIX, Poetry, "
        "Pixi), else warmkernel's own",
    ),
    Setting(
        flag="--add-ipykernel",
        dest="add_ipykernel",
        default=False,
        scope="kernel",
        kind=FLAG,
        help="when the project's environment lacks ipykernel, let `auto` install it, with the command the "
        "error names (off: that error is returned)",
    ),
    Setting(
        flag="--result-mode",
        dest="result_mode",
        default="content",
        scope="reply",
        kind=Choice(choices=("content", "structured")),
        help="`structured` adds `structuredContent` and output schemas; the text is the same",
    ),
    Setting(
        flag="--wait",
        dest="default_wait_s",
        default=10.0,
        scope="reply",
        kind=SECONDS,
        help="how long run_python waits for a cell before replying that it still runs",
    ),
    Setting(
        flag="--inline-lines",
        dest="inline_max_lines",
        default=300,
        scope="reply",
        kind=POSITIVE,
        help="lines of a finished cell shown inline before head and tail",
    ),
    Setting(
        flag="--inline-chars",
        dest="inline_max_chars",
        default=16_000,
        scope="reply",
        kind=POSITIVE,
        help="characters of a finished cell shown inline before head and tail",
    ),
    Setting(
        flag="--max-output-bytes",
        dest="max_output_bytes",
        default=2_000_000_000,
        scope="kernel",
        kind=POSITIVE_SIZE,
        help="cap on output spilled to disk; past it the oldest finished executions' output is dropped, "
        "and reading it says so",
    ),
    Setting(
        flag="--max-cell-output-bytes",
        dest="max_cell_output_bytes",
        default=1_000_000_000,
        scope="kernel",
        kind=SIZE,
        help="output one cell may produce; past it the cell's further output is dropped with one marker "
        "line on `stderr` and counted (the record's reason says how many bytes), and the cell runs on",
    ),
    Setting(
        flag="--max-kernel-memory",
        dest="max_kernel_memory_bytes",
        default=None,
        scope="kernel",
        kind=SIZE,
        absent="none",
        help="ceiling on the resident memory of a local kernel and every process it started (`8G`, `512M`; "
        "with a cgroup per kernel, also processes that left its tree): past it the running cell is "
        f"interrupted, and if memory stays above it for {MEMORY_GRACE_S:g} s the kernel is killed; the "
        "running cell's "
        "record reads `died (memory ceiling 8G exceeded (9.1G))` and the next reply says the namespace "
        "was lost. Sampled twice a second; a kernel on a Jupyter server has none",
    ),
    Setting(
        flag="--spill-threshold-bytes",
        dest="spill_threshold_bytes",
        default=1_000_000,
        scope="kernel",
        kind=SIZE,
        help="an execution's output moves from memory to private files (0600) past this size",
    ),
    Setting(
        flag="--spare-kernels",
        dest="spare_kernels",
        default=0,
        scope="kernel",
        kind=COUNT,
        help="fresh kernels kept started in the background (local ones, or on --jupyter-url), each "
        "costing one idle kernel's memory: a reset (or the restart after a kernel death) swaps one in at "
        "once and starts a replacement. A spare started before the interpreter's site directories "
        "changed (a package installed, a `.pth` file added or edited) is killed instead and a fresh "
        "kernel started. `python_status` says how many are ready",
    ),
    Setting(
        flag="--notebook",
        dest="notebook",
        default=None,
        scope="reply",
        kind=TEXT,
        metavar="NB",
        help="the notebook the `nb` verbs and the notebook tools use when a call gives no path",
    ),
    Setting(
        flag="--inspect-timeout",
        dest="inspect_timeout_s",
        default=5.0,
        scope="kernel",
        kind=SECONDS,
        help="time budget of one variable summary or listing; past it a degraded summary comes back",
    ),
    Setting(
        flag="--inspect-sample-rows",
        dest="inspect_sample_rows",
        default=5,
        scope="kernel",
        kind=COUNT,
        help="rows of a DataFrame a variable summary shows as its sample",
    ),
    Setting(
        flag="--max-images",
        dest="max_images_per_reply",
        default=8,
        scope="reply",
        kind=COUNT,
        help="images one reply carries as image content; the rest are named with the call that reads them",
    ),
    Setting(
        flag="--max-image-bytes",
        dest="max_image_bytes",
        default=5_000_000,
        scope="reply",
        kind=SIZE,
        help="larger images are named, not shown inline",
    ),
    Setting(
        flag="--jupyter-url",
        dest="jupyter_url",
        default=None,
        scope="kernel",
        kind=TEXT,
        metavar="URL",
        help="create the kernel on this Jupyter Server, Kernel Gateway or Enterprise Gateway instead of "
        "locally",
    ),
    Setting(
        flag="--jupyter-token",
        dest="jupyter_token",
        default=None,
        scope="kernel",
        kind=TEXT,
        metavar="TOKEN",
        secret=True,
        absent="${variable}",
        help="the token of --jupyter-url (sent as `Authorization: token …`); prefer the variable, which "
        "other users cannot read in the process list, unlike a flag",
    ),
    Setting(
        flag="--kernel-name",
        dest="kernel_name",
        default="python3",
        scope="kernel",
        kind=TEXT,
        metavar="NAME",
        help="the kernelspec the Jupyter server starts",
    ),
    Setting(
        flag="--max-kernels",
        dest="max_kernels",
        default=4,
        scope="kernel",
        kind=POSITIVE,
        help="the most kernels (`main` and named ones) that run at once; a stopped kernel does not count",
    ),
    Setting(
        flag="--kernel-idle-stop",
        dest="kernel_idle_stop_s",
        default=7200.0,
        scope="kernel",
        kind=DURATION,
        help="a kernel other than `main` with no call and no running cell for this long is stopped (its "
        "records stay); `0`: never",
    ),
    Setting(
        flag="--kernel-username",
        dest="kernel_username",
        default=None,
        scope="kernel",
        kind=TEXT,
        metavar="NAME",
        absent="$KERNEL_USERNAME, else your user name",
        help="`KERNEL_USERNAME` sent when creating a kernel on --jupyter-url; Enterprise Gateway authorizes "
        "(and may impersonate) by it",
    ),
    Setting(
        flag="--kernel-working-dir",
        dest="kernel_working_dir",
        default=None,
        scope="kernel",
        kind=TEXT,
        metavar="PATH",
        help="`KERNEL_WORKING_DIR` sent when creating a kernel: its working directory, a path on the "
        "server's side",
    ),
    Setting(
        flag="--kernel-env",
        dest="kernel_env",
        default=(),
        scope="kernel",
        kind=ASSIGNMENT,
        many=True,
        help="a variable of the kernel's environment sent when creating it, e.g. "
        "`KERNEL_IMAGE=repo/image:tag` or `KERNEL_NAMESPACE=ml` (repeatable; every `KERNEL_*` variable of "
        "this environment goes too)",
    ),
    Setting(
        flag="--kernel-launch-timeout",
        dest="kernel_launch_timeout_s",
        default=120.0,
        scope="kernel",
        kind=SECONDS,
        help="how long creating a kernel on --jupyter-url and its first reply may take (a gateway may "
        "pull an image first); run_python meanwhile replies that the kernel is still starting",
    ),
    Setting(
        flag="--jupyter-header",
        dest="jupyter_headers",
        default=(),
        scope="kernel",
        kind=ASSIGNMENT,
        many=True,
        help="a header sent with every request and websocket to --jupyter-url, e.g. for a proxy in front "
        "of it (repeatable; shown in the process list: keep secrets in the token)",
    ),
    Setting(
        flag="--jupyter-ca-bundle",
        dest="jupyter_ca_bundle",
        default=None,
        scope="kernel",
        kind=FILE,
        absent="the system's certificate authorities",
        help="PEM file of the certificate authorities an https --jupyter-url is checked against (REST "
        "and websocket alike)",
    ),
    Setting(
        flag="--jupyter-client-cert",
        dest="jupyter_client_cert",
        default=None,
        scope="kernel",
        kind=FILE,
        help="PEM client certificate (with its key, or see --jupyter-client-key) for a server that asks "
        "for one",
    ),
    Setting(
        flag="--jupyter-client-key",
        dest="jupyter_client_key",
        default=None,
        scope="kernel",
        kind=FILE,
        help="PEM private key of --jupyter-client-cert, when it is in a file of its own",
    ),
    Setting(
        flag="--jupyter-token-file",
        dest="jupyter_token_file",
        default=None,
        scope="kernel",
        kind=FILE,
        help="file holding the token of --jupyter-url, read again whenever the server answers 401, so a "
        "rotated token is picked up",
    ),
    Setting(
        flag="--no-save-outputs",
        dest="save_outputs",
        default=True,
        scope="kernel",
        kind=FLAG,
        help="do not write the outputs of notebook cells back into the `.ipynb`",
    ),
    Setting(
        flag="--idle-stop",
        dest="idle_stop",
        default=12 * 3600.0,
        scope="daemon",
        kind=DURATION,
        help="a daemon started here stops after this long with no client and no running cell; `0`: never",
    ),
    Setting(
        flag="--idle-stop-unused",
        dest="idle_stop_unused",
        default=600.0,
        scope="daemon",
        kind=DURATION,
        help="a daemon started here that has run no cell (a host that only lists its servers, say) stops "
        "after this long with no client; `0`: as --idle-stop",
    ),
    Setting(
        flag="--state-dir",
        dest="state_dir",
        default=None,
        scope="daemon",
        kind=DIRECTORY,
        absent="${variable}, else $XDG_STATE_HOME/warmkernel, else ~/.local/state/warmkernel",
        help="where a daemon started here keeps the journal of its records",
    ),
    Setting(
        flag="--log-level",
        dest="log_level",
        default="WARNING",
        scope="daemon",
        kind=Choice(choices=("DEBUG", "INFO", "WARNING", "ERROR"), upper=True),
        help="the daemon's log level, in either case (its log is in the runtime directory)",
    ),
    Setting(
        flag="--host",
        dest="host",
        default="127.0.0.1",
        scope="daemon",
        kind=TEXT,
        verb="serve",
        help="address to bind; beyond loopback needs --allowed-host",
    ),
    Setting(
        flag="--port",
        dest="port",
        default=8801,
        scope="daemon",
        kind=PORT,
        verb="serve",
        help="port to bind; 0 picks a free one",
    ),
    Setting(
        flag="--path",
        dest="path",
        default="/mcp",
        scope="daemon",
        kind=TEXT,
        verb="serve",
        help="URL path of the MCP endpoint",
    ),
    Setting(
        flag="--token",
        dest="token",
        default=None,
        scope="daemon",
        kind=TEXT,
        verb="serve",
        secret=True,
        absent="${variable}, else a generated one",
        help="bearer token to require (the process list shows it: --token-file does not)",
    ),
    Setting(
        flag="--token-file",
        dest="token_file",
        default=None,
        scope="daemon",
        kind=FILE,
        verb="serve",
        metavar="PATH",
        help="file holding the bearer token (whitespace around it dropped)",
    ),
    Setting(
        flag="--allowed-host",
        dest="allowed_host",
        default=(),
        scope="daemon",
        kind=TEXT,
        metavar="NAME[:PORT]",
        many=True,
        verb="serve",
        help="a Host header to accept (repeatable); required to bind beyond loopback",
    ),
    Setting(
        flag="--serve",
        dest="serve",
        default=False,
        scope="daemon",
        kind=FLAG,
        verb="start",
        help="run the kernel on a Jupyter Server this daemon owns, for JupyterLab or VS Code to attach to "
        "(in NB's server session when NB is given); needs warmkernel[serve]",
    ),
    Setting(
        flag="--server-port",
        dest="server_port",
        default=None,
        scope="daemon",
        kind=PORT,
        verb="start",
        absent="a free one",
        help="with --serve: the loopback port of that Jupyter Server",
    ),
    Setting(
        dest="read_max_chars",
        default=200_000,
        scope="kernel",
        kind=POSITIVE,
        help="the most characters one read_python_output reply carries",
    ),
    Setting(
        dest="search_timeout_s",
        default=5.0,
        scope="kernel",
        kind=SECONDS,
        help="time budget of one search; a regex that runs longer is abandoned",
    ),
    Setting(
        dest="running_tail_lines",
        default=5,
        scope="kernel",
        kind=COUNT,
        help="how many of the latest output lines a reply for a running cell shows",
    ),
    Setting(
        dest="chart_timeout_s",
        default=10.0,
        scope="kernel",
        kind=SECONDS,
        help="a chart (Vega, Vega-Lite, SVG, Plotly) not drawn as a picture within this is shown as a note",
    ),
    Setting(
        dest="summarizers",
        default=(),
        scope="kernel",
        kind=TEXT,
        many=True,
        help="user summarizers, `module:function`, imported inside the kernel and tried before the "
        "built-ins (the project's `[inspection] summarizers`)",
    ),
    Setting(
        dest="config_files",
        default=(),
        scope="kernel",
        kind=FILE,
        many=True,
        help="the configuration files this server's settings were read from (python_status names them)",
    ),
    Setting(
        dest="jupyter_notebook",
        default=None,
        scope="kernel",
        kind=TEXT,
        help="a notebook path on the Jupyter server: the kernel joins that notebook's server session, so "
        "an IDE opening the notebook there attaches to it",
    ),
    Setting(
        dest="progress_interval_s",
        default=5.0,
        scope="reply",
        kind=SECONDS,
        help="while a tool waits for a cell, a progress notification goes out this often (if the client "
        "asked)",
    ),
    Setting(
        dest="default_silence_s",
        default=None,
        scope="reply",
        kind=SECONDS,
        help="run_python also replies once a cell has printed nothing this long (`warmkernel run "
        "--silence`); None: only the cell's own `--silence` directive does",
    ),
)

DECLARED = MappingProxyType({setting.dest: setting for setting in CATALOG})
"""Each setting by its `dest`."""

CONFIGURABLE = tuple(setting for setting in CATALOG if setting.flag)
"""The settings a flag, a file key and a variable set."""
