"""Regexes of NCCL's INFO/WARN message families, NCCL 2.4 → 2.30 (nccl_logs.md §3–12).

Each applies to the message: the text after `NCCL INFO ` / `NCCL WARN `. `dispatch(msg)` names
the families worth trying for a message from its first word, so a line costs one or two
regex matches, not forty.
"""

from __future__ import annotations

import re

C = re.compile

#: `NCCL version 2.18.3+cuda12.2`; the RAS client (2.24+) says `NCCL version 2.26.2 compiled
#: with CUDA 12.8`; a build may print no CUDA version at all.
_VERSION = (
    r"NCCL version (?P<ver>\d+\.\d+\.\d+)(?P<suffix>[^+\s]*)"
    r"(?:(?:\+cuda| compiled with CUDA )(?P<cuda>\d+\.\d+)[^\s]*)?\s*$"
)
VERSION = C("^" + _VERSION)
#: The bare stdout form (<= 2.21, NCCL_DEBUG=VERSION, the RAS client), searched on the line.
BARE_VERSION = C(_VERSION)
#: AMD RCCL's own version line (`RCCL version : 2.22.3-HEAD:271856d`).
RCCL_VERSION = C(r"^RCCL version ?: ?(?P<ver>\d+\.\d+\.\d+)(?P<suffix>\S*)")
GIT_VERSION = C(r"^NCCL git version (?P<branch>\S+) (?P<sha>\S+)$")
CUDA_DRIVER = C(r"^cudaDriverVersion (?P<v>\d+)$")

BOOTSTRAP = C(r"^Bootstrap(?P<space> ?): Using ?(?P<items>.*)$")
IFACE_ITEM = C(r"(?:\[(?P<idx>\d+)\])?(?P<dev>[^\s\[\]]+?):(?P<addr>\S+)<(?P<port>\d+)>")
IB_USING = C(
    r"^NET/IB\w* ?: Using(?P<devs>.*?) ?(?P<ro>\[RO\])?; OOB (?P<oobif>[^:]+):(?P<oobip>.+)"
    r"<(?P<port>\d+)>$"
)
IB_ITEM = C(r"\[(?P<idx>\d+)\] ?(?P<dev>\w+):(?P<port>\d+)/(?P<link>IB|RoCE)(?P<sharp>/SHARP)?")
NO_IB = C(r"^NET/IB\w* ?: No device found\.?$")
SOCKET_USING = C(r"^NET/Socket ?: Using(?P<items>(?: \[\d+\]\S+?:\S+<\d+>)+)$")
SOCKET_THREADS = C(r"^NET/Socket ?: Using (?P<threads>\d+) threads and (?P<socks>\d+) sockets")
NETWORK = C(r"^Using network (?P<net>.+)$")
ASSIGNED_PLUGIN = C(r"^Assigned (?P<kind>NET|GIN) plugin (?P<name>.+?) to comm$")
NET_PLUGIN = C(r"^NET/Plugin ?: ?(?P<rest>.*)$")
#: The net plugin in use, named when it is initialised or closed (2.19+).
NET_PLUGIN_NAMED = C(
    r"^(?:NET/Plugin ?: ?)?(?:Closing net plugin|Initialized NET plugin) '?(?P<name>[\w.-]+)'?$"
)
OTHER_PLUGIN = C(r"^(?P<kind>TUNER|PROFILER|ENV)/Plugin: (?P<rest>.*)$")
LOADED_PLUGIN = C(
    r"^(?:Loaded|Using) (?:non-device )?(?P<kind>net|coll|tuner|profiler) plugin (?P<rest>.*)$",
    re.I,
)
OFI = C(r"^NET/OFI (?P<rest>.*)$")
OFI_NICS = C(r"found (?P<n>\d+) nics")
OFI_PROVIDER = C(r"Selected [Pp]rovider is (?P<p>[\w;-]+)")
GDR = C(
    r"^(?:NET/\S+ ?: )?GPU Direct RDMA (?:\([^)]*\) )?(?P<s>[Ee]nabled|[Dd]isabled) for "
    r"(?P<rest>.*)$"
)

COMM = C(
    r"^(?:\[Rank (?P<grank>\d+)\] )?(?:(?P<func>\w+) )?comm (?P<comm>0x[0-9a-f]+) "
    r"rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cudaDev>\d+)"
    r"(?: nvmlDev (?P<nvmlDev>\d+))?(?: busId (?P<busId>[0-9a-f]+))?"
    r"(?: parent (?P<parent>\S+) (?:(?:splitCount|childCount) \d+ )?color -?\d+ key -?\d+)?"
    r"(?: commId (?P<commId>0x[0-9a-f]+))?(?: localSize \d+ used \d+ bytes(?: on core \d+)?)?"
    r"(?: ?- (?P<event>Init START|Init COMPLETE|Destroy COMPLETE|Abort COMPLETE))?$"
)
COMM_NODES = C(
    r"^comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) "
    r"localRanks (?P<lranks>\d+) localRank (?P<lrank>\d+) MNNVL (?P<mnnvl>\d+)$"
)
INIT_TIMINGS = C(
    r"^Init timings(?: - (?P<func>\w+))?: rank (?P<rank>\d+) nranks (?P<nranks>\d+) "
    r"total (?P<total>[\d.]+)(?: \(.*\))?$"
)

RING_ORDER = C(
    r"^(?:Channel|Ring) (?P<ch>\d{2,3})(?:/(?P<nch>\d{2,3}))? ?:?(?P<ranks>(?: +\d+)+)"
    r"(?P<trunc>\.\.\.)?$"
)
TREES = C(r"^Trees(?P<entries>(?: \[\d+\] [-\d/>|]+)+)$")
TREE_ENTRY = C(r"\[(?P<ch>\d+)\] (?P<body>[-\d/>|]+)")
#: 2.5+: d0/d1/d2->me->up (2.5–2.7 append a second half `|up->me->d0/d1/d2`).
TREE_DOWN_FIRST = C(r"^(-?\d+)/(-?\d+)/(-?\d+)->(-?\d+)->(-?\d+)(\|.*)?$")
#: 2.4: up->me->d0/d1/d2.
TREE_UP_FIRST = C(r"^(-?\d+)->(-?\d+)->(-?\d+)/(-?\d+)/(-?\d+)$")

CONNECTION = C(
    r"^(?P<kw>Channel|Ring) (?P<ch>\d{2,3})(?:/(?P<conn>\d))? : "
    r"(?P<src>\d+)(?:\[(?P<srcid>[0-9a-f]+)\])? -> (?P<dst>\d+)(?:\[(?P<dstid>[0-9a-f]+)\])? "
    r"(?:\[(?P<dir>send|receive)\] )?via (?P<via>.+)$"
)
VIA_NET = C(
    r"^NET/(?P<net>[^/]+)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?(?P<gdr>/GDRDMA)?(?:\(PCI\))?"
    r"(?P<shared>/Shared)?"
)
#: An IB/RoCE queue pair's path MTU as NCCL sets it up (2.2x+: `NET/IB: NCCL Dev 1 IbDev 0 Port 1
#: qpn 199 mtu 3 query_ece=...`): the verbs enum, 1-5 = 256-4096 bytes.
IB_MTU = C(
    r"^NET/IB ?: ?NCCL Dev (?P<ndev>\d+) IbDev (?P<ibdev>\d+) Port (?P<port>\d+) qpn \d+ "
    r"mtu (?P<mtu>[1-5])\b"
)
VIA_P2P = C(r"^P2P/(?P<kind>direct pointer|IPC|CUMEM|indirect|MNNVL|common device)")
VIA_SHM = C(r"^(?:SHM/|direct shared memory)")
COLLNET = C(
    r"^CollNet (?P<ch>\d{2})(?:/(?P<conn>\d))? : (?P<rank>\d+) \[(?P<dir>send|receive)\] via "
    r"COLLNET/(?P<name>[^/]+)/(?P<dev>\d+)(?P<gdr>/GDRDMA)?(?P<shared>/Shared)?$"
)

NVLS_SUPPORT = C(r"^NVLS multicast support is (?P<no>not )?available on dev (?P<dev>\d+)$")
NVLS_COMM = C(
    r"^NVLS comm (?P<comm>0x[0-9a-f]+) headRank (?P<head>-?\d+) nHeads (?P<nheads>\d+) "
    r"buffSize \d+ (?:memSize \d+ )?nvlsPerRankSize \d+ nvlsTotalSize \d+$"
)
CONNECTED = C(
    r"^Connected (?:all (?P<what>rings|trees)(?:, use ring PXN (?P<pxn>\d) GDR (?P<gdr>\d))?"
    r"|(?P<nvls>NVLS tree)|(?P<collnet>collnet \+ chain))$"
)
CHANNEL_COUNTS = C(
    r"^(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?"
    r"(?:(?P<nvls>\d+) nvls channels, )?(?P<p2p>\d+) p2p channels, "
    r"(?P<ppp>\d+) p2p channels per peer$"
)

COLL = C(
    r"^(?:(?P<op>[A-Za-z]+): )?opCount (?P<opcount>[0-9a-f]{1,15}) sendbuff \S+ recvbuff \S+ "
    r"count (?P<count>\d{1,15})(?: size \d+)? datatype (?P<dtype>\d{1,3}) op (?P<redop>\d{1,9})"
    r"(?: root (?P<root>-?\d{1,9}))? comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<nranks>\d{1,9})\] "
    r"stream (?P<stream>\S+)$"
)

TUNING_CHOICE = C(
    r"^(?:(?P<func>[A-Za-z]+): )?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
    r"(?: time (?P<time>[\d.]+)| channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})$"
)
TUNING_OLD_HEADER = C(r"^Latency/AlgBw \|(?P<cells>.*)$")
TUNING_ALGOS = C(r"^ *Algorithm +\|(?P<cells>.*)$")
TUNING_PROTOS = C(r"^ *Protocol +\|(?P<cells>.*)$")
TUNING_THREADS = C(r"^ *Max NThreads \|(?P<cells>.*)$")
#: A number of a tuning table cell (`12.5`, `-1`, `0`).
_NUM = r"-?\d+(?:\.\d+)?"
TUNING_ROW = C(rf"^ *(?P<func>[A-Za-z]+) \|(?P<cells>(?: *{_NUM}/ *{_NUM} \|)+)$")
TUNING_CELL = C(rf"({_NUM})/ *({_NUM})")
TUNING_MATRIX = C(r"^Enabled NCCL Func/Proto/Algo Matrix:?$")

ENV = C(r"^(?P<name>NCCL_\w+) set (?:by environment )?to (?P<value>.*?)\.?$")

UNWIND = C(
    r"^(?P<file>[\w./+-]+):(?P<line>\d+) -> (?P<code>\d+)"
    r"(?: \[(?P<thread>Async thread|Progress Thread|Proxy Thread|Service thread)\])?$"
)

#: What RCCL appends to many of its lines (` comm 0x3cf9cf50 nRanks 16`).
RCCL_TAIL = C(r" comm 0x[0-9a-f]+ nRanks \d+(?: busId [0-9a-f]+)?$")

#: Well-known informational families commwall recognises but does not store.
BENIGN = C(
    r"^(?:Setting affinity for GPU|P2P Chunksize set to|threadThresholds |CC (?:Off|On)|"
    r"Bootstrap timings total|Check P2P Type|Allocated \d+ bytes|MNNVL|"
    r"Ring \d+ : \d+ -> \d+ -> \d+$|Tree \d+ : |Pattern \d+, crossNic|=== System|"
    r"Could not enable P2P between|Comm config|Using \d+ threads|"
    # PROXY: proxy threads and their connections.
    r"Connected to proxy|New proxy (?:send|recv) connection|Received and initiated operation|"
    r"ncclPollProxyResponse|proxyProgressAsync|resp\.opId=|\[Proxy [\w ]+\] Device|"
    r"(?:send|recv)Connect ncclP|Queuing opId=|"
    # TRACE: API calls with their arguments.
    r"nccl\w+\(|"
    r"UDS: Creating service|socketProgressOpt: abort called|\[Proxy Service UDS\] exit|"
    # ALLOC: allocations, with or without the source file in front.
    r"(?:[\w/]+\.cc:\d+ )?(?:Cuda|Ib|Cuda Host) Alloc Size|Mem Realloc|"
    r"Allocated shareable buffer|MMAP (?:allocated|imported) shareable|[\w/]+\.cc:\d+ memory stack|"
    # GRAPH / topology dumps.
    r" *\d+ : (?:GPU|NET)/|[ +]*(?:PCI|NVL|NET|SYS|NVS|PHB|LOC)\[[\d.]+\] - |CPU/\d|GPU/\d+-\w+ :|"
    r"=+$|TOPO/NET|ncclTopoPopulateNics|NVLS Head|NET/\d+-\w+ :|Loading topology file|"
    # NET and plugins.
    r"NET/IB ?: ?(?:Made virtual device|NCCL Dev|IbDev|\[\d+\] \w+:uverbs)|Plugin Path|P2P plugin|"
    r"Initialized state \d+ for|"
    r"Successfully loaded external plugin|PXN Disabled as plugin|Sharp rank|DMA-BUF is available|"
    r"Retrieving state for|Launch mode|RAS |"
    # AMD RCCL.
    r"\[node_id = |initialized internal alternative rsmi|Kernel version|ROCr version|"
    r"HIP version|Dmabuf feature disabled|Enabled GDRCopy equivalent|Found /sys/|"
    # Topology and graph XML dumps (NCCL_TOPO_DUMP_FILE / GRAPH), IB NIC distances (2.4/2.5).
    r" *</?[a-z]+[ >/]|NET/IB ?: IB NIC distance)"
)

#: WARN messages worth naming (nccl_logs.md §11), first match wins.
WARN_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ib_completion", C(r"NET/IB ?: Got completion from peer")),
    ("socket_closed", C(r"Connection closed by remote peer")),
    ("cuda_failure", C(r"Cuda failure '")),
    ("alloc_failure", C(r"Failed to CUDA calloc")),
    ("proxy_failure", C(r"\[Proxy Service \d+\] Failed to execute operation")),
    ("qp_failure", C(r"Call to ibv_modify_qp failed")),
    ("ring_loop", C(r"Error : ring \d+ does not loop back")),
    ("collnet_unsupported", C(r"CollNet is not supported or fails to initialize")),
    ("timeout", C(r"[Tt]imeout|timed out")),
)

#: ncclDataType_t → (name, bytes) (nccl.h; fp8 types 2.24.3+).
DATATYPES = (
    ("int8", 1), ("uint8", 1), ("int32", 4), ("uint32", 4), ("int64", 8), ("uint64", 8),
    ("float16", 2), ("float32", 4), ("float64", 8), ("bfloat16", 2),
    ("float8e4m3", 1), ("float8e5m2", 1),
)  # fmt: skip

#: Algorithm ids of the numeric tuning lines (2.20–2.23) and protocol ids.
ALGOS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
PROTOS = ("LL", "LL128", "SIMPLE")
#: Tuning-table spellings (ncclAlgoStr) → the names above (`CollNet` is <= 2.13's only one).
ALGO_SPELLINGS = {
    "CollNetDirect": "COLLNET_DIRECT",
    "CollNetChain": "COLLNET_CHAIN",
    "NVLSTree": "NVLS_TREE",
}

#: Families by the message's first word. Anything else tries FALLBACK.
_BY_WORD: dict[str, tuple[str, ...]] = {
    "NCCL": ("version", "git_version"),
    "RCCL": ("rccl_version",),
    "cudaDriverVersion": ("cuda_driver",),
    "Bootstrap": ("bootstrap",),
    "Bootstrap:": ("bootstrap",),
    "NET/IB": ("ib_using", "no_ib", "gdr"),
    "NET/IB:": ("ib_mtu", "gdr", "ib_using", "no_ib"),
    "NET/Socket": ("socket_using", "socket_threads", "gdr"),
    "NET/Socket:": ("socket_using", "socket_threads"),
    "NET/Plugin": ("net_plugin_named", "net_plugin"),
    "NET/Plugin:": ("net_plugin_named", "net_plugin"),
    "Initialized": ("net_plugin_named",),
    "NET/OFI": ("ofi",),
    "Using": ("network", "loaded_plugin"),
    "Loaded": ("loaded_plugin",),
    "Assigned": ("assigned_plugin",),
    "GPU": ("gdr",),
    "comm": ("comm", "comm_nodes"),
    "Init": ("init_timings",),
    "Channel": ("ring_order", "connection"),
    "Ring": ("ring_order", "connection"),
    "Trees": ("trees",),
    "NVLS": ("nvls_support", "nvls_comm"),
    "Connected": ("connected",),
    "CollNet": ("collnet",),
    "Latency/AlgBw": ("tuning_old_header",),
    "": ("tuning_algos", "tuning_protos", "tuning_threads", "tuning_row"),
    "Max": ("tuning_threads",),
    "Enabled": ("tuning_matrix",),
}
_FALLBACK = ("coll", "tuning_choice", "channel_counts", "tuning_row", "env", "unwind", "gdr")


def dispatch(msg: str) -> tuple[str, ...]:
    """Names of the families a message may belong to, most likely first."""
    word = msg.split(" ", 1)[0]
    found = _BY_WORD.get(word)
    if found is not None:
        return found
    if word.startswith("NET/"):
        return ("gdr", "ib_using", "no_ib")
    if word.startswith(("TUNER/", "PROFILER/", "ENV/")):
        return ("other_plugin",)
    if word.startswith("[Rank"):
        return ("comm",)
    if word.startswith("ncclComm"):
        return ("comm",)
    return _FALLBACK
