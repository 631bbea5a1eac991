/*
** err_kv.h: stable error codes of adapter-aware KV compatibility, the
** semantic prefix identity, activated-LoRA offsets, the dependency
** closure, the prefix cache and the exact KV witness.  Range -420..-499.
** Append only; never renumber.  docs/PREFIX.md has the table with the
** meaning of each code and the failure of article 0x08L it closes.
*/
#define LSIM_ERRCODES_KV(X)                                                 \
  X(LSIM_E_KV_BASE_ABI,         -420, "E_KV_BASE_ABI")                      \
  X(LSIM_E_KV_CACHE_ABI,        -421, "E_KV_CACHE_ABI")                     \
  X(LSIM_E_KV_GRAPH_REV,        -422, "E_KV_GRAPH_REV")                     \
  X(LSIM_E_KV_GRAPH_ARCH,       -423, "E_KV_GRAPH_ARCH")                    \
  X(LSIM_E_KV_GRAPH_LAYERS,     -424, "E_KV_GRAPH_LAYERS")                  \
  X(LSIM_E_KV_SIDE_INPUTS,      -425, "E_KV_SIDE_INPUTS")                   \
  X(LSIM_E_KV_ISOLATION,        -426, "E_KV_ISOLATION")                     \
  X(LSIM_E_KV_TOKENS,           -427, "E_KV_TOKENS")                        \
  X(LSIM_E_KV_TOKEN_ID,         -428, "E_KV_TOKEN_ID")                      \
  X(LSIM_E_KV_BLOCK_TOKENS,     -429, "E_KV_BLOCK_TOKENS")                  \
  X(LSIM_E_KV_POSITION,         -430, "E_KV_POSITION")                      \
  X(LSIM_E_KV_ADAPTER_KIND,     -431, "E_KV_ADAPTER_KIND")                  \
  X(LSIM_E_KV_SEMANTIC,         -432, "E_KV_SEMANTIC")                      \
  X(LSIM_E_KV_REVISION,         -433, "E_KV_REVISION")                      \
  X(LSIM_E_KV_NO_TARGETS,       -434, "E_KV_NO_TARGETS")                    \
  X(LSIM_E_KV_TARGET_LAYER,     -435, "E_KV_TARGET_LAYER")                  \
  X(LSIM_E_KV_TARGET_PROJ,      -436, "E_KV_TARGET_PROJ")                   \
  X(LSIM_E_KV_TARGET_DUP,       -437, "E_KV_TARGET_DUP")                    \
  X(LSIM_E_KV_BASE_FIELDS,      -438, "E_KV_BASE_FIELDS")                   \
  X(LSIM_E_KV_LORA_INVOCATION,  -439, "E_KV_LORA_INVOCATION")               \
  X(LSIM_E_KV_INVOCATION_EMPTY, -440, "E_KV_INVOCATION_EMPTY")              \
  X(LSIM_E_KV_INVOCATION_TOKEN, -441, "E_KV_INVOCATION_TOKEN")              \
  X(LSIM_E_KV_INVOCATION_ABSENT, -442, "E_KV_INVOCATION_ABSENT")            \
  X(LSIM_E_KV_EMBEDS_ONLY,      -443, "E_KV_EMBEDS_ONLY")                   \
  X(LSIM_E_KV_OFFSET,           -444, "E_KV_OFFSET")                        \
  X(LSIM_E_KV_OFFSET_MODE,      -445, "E_KV_OFFSET_MODE")                   \
  X(LSIM_E_KV_MERGED,           -446, "E_KV_MERGED")                        \
  X(LSIM_E_KV_BEAM,             -447, "E_KV_BEAM")                          \
  X(LSIM_E_KV_KEY_REQUEST_ID,   -448, "E_KV_KEY_REQUEST_ID")                \
  X(LSIM_E_KV_KEY_SLOT,         -449, "E_KV_KEY_SLOT")                      \
  X(LSIM_E_KV_KEY_SLOT_GEN,     -450, "E_KV_KEY_SLOT_GEN")                  \
  X(LSIM_E_KV_KEY_POINTER_GEN,  -451, "E_KV_KEY_POINTER_GEN")               \
  X(LSIM_E_KV_KEY_BLOCK_IDS,    -452, "E_KV_KEY_BLOCK_IDS")                 \
  X(LSIM_E_KV_KEY_SAMPLING,     -453, "E_KV_KEY_SAMPLING")                  \
  X(LSIM_E_KV_KEY_RAW_ADAPTER,  -454, "E_KV_KEY_RAW_ADAPTER")               \
  X(LSIM_E_KV_KEY_NO_EXEC,      -455, "E_KV_KEY_NO_EXEC")                   \
  X(LSIM_E_KV_KEY_NO_TOKENS,    -456, "E_KV_KEY_NO_TOKENS")                 \
  X(LSIM_E_KV_KEY_NO_CACHE_ABI, -457, "E_KV_KEY_NO_CACHE_ABI")              \
  X(LSIM_E_KV_KEY_NO_SIDE,      -458, "E_KV_KEY_NO_SIDE")                   \
  X(LSIM_E_KV_KEY_NO_NAMESPACE, -459, "E_KV_KEY_NO_NAMESPACE")              \
  X(LSIM_E_KV_KEY_NO_GRAPH,     -460, "E_KV_KEY_NO_GRAPH")                  \
  X(LSIM_E_KV_KEY_UNKNOWN,      -461, "E_KV_KEY_UNKNOWN")                   \
  X(LSIM_E_KV_UNPROVEN,         -462, "E_KV_UNPROVEN")                      \
  X(LSIM_E_KV_REUSE_KV_TARGET,  -463, "E_KV_REUSE_KV_TARGET")               \
  X(LSIM_E_KV_REUSE_DOWNSTREAM, -464, "E_KV_REUSE_DOWNSTREAM")              \
  X(LSIM_E_KV_REUSE_HIDDEN,     -465, "E_KV_REUSE_HIDDEN")                  \
  X(LSIM_E_KV_REUSE_LOGITS,     -466, "E_KV_REUSE_LOGITS")                  \
  X(LSIM_E_KV_REUSE_TAINTED,    -467, "E_KV_REUSE_TAINTED")                 \
  X(LSIM_E_KV_REUSE_BLOCK,      -468, "E_KV_REUSE_BLOCK")                   \
  X(LSIM_E_KV_REUSE_BOUNDARY,   -469, "E_KV_REUSE_BOUNDARY")                \
  X(LSIM_E_KV_REUSE_TOKENS,     -470, "E_KV_REUSE_TOKENS")                  \
  X(LSIM_E_KV_REUSE_CACHE_ABI,  -471, "E_KV_REUSE_CACHE_ABI")               \
  X(LSIM_E_KV_REUSE_BASE,       -472, "E_KV_REUSE_BASE")                    \
  X(LSIM_E_KV_REUSE_GRAPH,      -473, "E_KV_REUSE_GRAPH")                   \
  X(LSIM_E_KV_REUSE_SIDE,       -474, "E_KV_REUSE_SIDE")                    \
  X(LSIM_E_KV_REUSE_NAMESPACE,  -475, "E_KV_REUSE_NAMESPACE")               \
  X(LSIM_E_KV_REUSE_REVISION,   -476, "E_KV_REUSE_REVISION")                \
  X(LSIM_E_KV_UNAUTHORIZED,     -477, "E_KV_UNAUTHORIZED")                  \
  X(LSIM_E_KV_GRANT,            -478, "E_KV_GRANT")                         \
  X(LSIM_E_KV_CFG,              -479, "E_KV_CFG")                           \
  X(LSIM_E_KV_NOSPACE,          -480, "E_KV_NOSPACE")                       \
  X(LSIM_E_KV_STALE_HANDLE,     -481, "E_KV_STALE_HANDLE")                  \
  X(LSIM_E_KV_REFCOUNT,         -482, "E_KV_REFCOUNT")                      \
  X(LSIM_E_KV_IMMUTABLE,        -483, "E_KV_IMMUTABLE")                     \
  X(LSIM_E_KV_RELABEL,          -484, "E_KV_RELABEL")                       \
  X(LSIM_E_KV_PUBLISH_ORDER,    -485, "E_KV_PUBLISH_ORDER")                 \
  X(LSIM_E_KV_PARTIAL_BLOCK,    -486, "E_KV_PARTIAL_BLOCK")                 \
  X(LSIM_E_KV_RECEIPT,          -487, "E_KV_RECEIPT")                       \
  X(LSIM_E_KV_POOL,             -488, "E_KV_POOL")                          \
  X(LSIM_E_KV_WITNESS_SHAPE,    -489, "E_KV_WITNESS_SHAPE")                 \
  X(LSIM_E_KV_WITNESS_INEXACT,  -490, "E_KV_WITNESS_INEXACT")               \
  X(LSIM_E_KV_WITNESS_BASE,     -491, "E_KV_WITNESS_BASE")                  \
  X(LSIM_E_KV_SCN_TYPE,         -492, "E_KV_SCN_TYPE")                      \
  X(LSIM_E_KV_SCN_MODE,         -493, "E_KV_SCN_MODE")                      \
  X(LSIM_E_KV_SCN_RANGE,        -494, "E_KV_SCN_RANGE")                     \
  X(LSIM_E_KV_SCN_TRACE,        -495, "E_KV_SCN_TRACE")
