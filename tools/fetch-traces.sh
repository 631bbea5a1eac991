#!/bin/sh
# tools/fetch-traces.sh: download the public traces lorasim's tests and
# scenarios read, check each file's SHA-256, and put it in place atomically.
#
#   sh tools/fetch-traces.sh [--dest DIR] [--from-dir DIR] [--list] [SET...]
#
# SET is azure-2023, azure-2024, burstgpt, mooncake or servegen (default:
# all of them).  Files land in DIR (default ../shared/data/traces beside the
# repository, the place tests and scenarios look) in the layout of the
# manifest below, e.g. DIR/azure-llm-2023/AzureLLMInferenceTrace_conv.csv.
#
#   --dest DIR      where the files go (created when missing)
#   --from-dir DIR  copy each file from DIR/<same relative path> instead of
#                   downloading it (a mirror, a USB stick, another clone's
#                   ../shared), with the same digest check
#   --list          print the manifest (set, path, URL, SHA-256) and exit
#
# Each file is fetched (curl, else wget) or copied into a temporary file in
# its destination directory, its SHA-256 compared with the pinned one
# (sha256sum), and only then renamed over the final name, so a failed or
# interrupted fetch leaves nothing half-written under that name.  A file
# already there with the pinned digest is left alone.  A digest marked
# "unpinned" was not verified here (the file was not available when the
# manifest was written): the file is taken as downloaded and its digest
# printed, to be pinned in this manifest.
#
# Provenance (docs/TRACES.md, ../shared/data/traces/*/SOURCE.md): the URLs
# name fixed commits.  The Azure 2023, Mooncake and ServeGen digests were
# computed here from the copies in ../shared/data/traces; BurstGPT's is the
# Git LFS object id (the SHA-256 of the file) of its pointer at that commit;
# the Azure 2024 files are unpinned.
#
# Exit status: 0 every file in place and verified, 1 a download, digest or
# I/O failure (the other files are still fetched), 2 bad usage.
set -eu

MANIFEST='
azure-2023 azure-llm-2023/AzureLLMInferenceTrace_code.csv https://raw.githubusercontent.com/Azure/AzurePublicDataset/b469a113cedca53ddc3bdea71a143dc4b7d8700c/data/AzureLLMInferenceTrace_code.csv 54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6
azure-2023 azure-llm-2023/AzureLLMInferenceTrace_conv.csv https://raw.githubusercontent.com/Azure/AzurePublicDataset/b469a113cedca53ddc3bdea71a143dc4b7d8700c/data/AzureLLMInferenceTrace_conv.csv 2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8
azure-2024 azure-llm-2024/AzureLLMInferenceTrace_code_1week.csv https://github.com/Azure/AzurePublicDataset/releases/download/dataset-llm-2024/AzureLLMInferenceTrace_code_1week.csv unpinned
azure-2024 azure-llm-2024/AzureLLMInferenceTrace_conv_1week.csv https://github.com/Azure/AzurePublicDataset/releases/download/dataset-llm-2024/AzureLLMInferenceTrace_conv_1week.csv unpinned
burstgpt burstgpt/BurstGPT_1.csv https://media.githubusercontent.com/media/HPMLL/BurstGPT/5d93d820d9b6bee4e26914df003e5713538164ae/data/BurstGPT_1.csv 4bb3783693d0a435686fbfc885615d2349bd067239079fa4b749f2e679e12122
mooncake mooncake-fast25/conversation_trace.jsonl https://raw.githubusercontent.com/kvcache-ai/Mooncake/3cca71daccf2a7afb8fe3f0295358f70e3a69fdb/FAST25-release/traces/conversation_trace.jsonl b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df
servegen servegen-m-small/chunk-0-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-0-trace.csv 9eb23fb96b414a053c4ab91faf21cce1ab58b7318fcb29b1a1c2389cd507ed74
servegen servegen-m-small/chunk-1-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-1-trace.csv a36ec48642134c04e66c9fc61e02ef2bb8cd96fedfd2e9b8cc11ae173a97f7a2
servegen servegen-m-small/chunk-2-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-2-trace.csv 642abb6ed02fe861bbe8a3d2e6b8abcc5d1c11049030fdf5856389616e3a330b
servegen servegen-m-small/chunk-3-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-3-trace.csv 428bd0364cac479d3f94e49bf7ed3c15b7cc3da1564b79110da7348108d47563
servegen servegen-m-small/chunk-4-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-4-trace.csv 66a78afdc8cc03a979baaa8083498c8a50c38c771561059f363ce95f00e6f1f9
servegen servegen-m-small/chunk-5-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-5-trace.csv 54a61d1d058bdd778c4b637475c23958622ee9a1cfb7f03820d33e193966fbe4
servegen servegen-m-small/chunk-6-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-6-trace.csv ecd1edca59c5d8ee6ea5215c5a1aaf32a36e93cbc9f54c1a1d6c915b24afb218
servegen servegen-m-small/chunk-7-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-7-trace.csv 787480c7b1ff1f8058ddf7d239bca7dcb5d053aa5151288ccf66f067f41771f5
servegen servegen-m-small/chunk-8-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-8-trace.csv 32c3e5a55e4288f5d821899cd2e043d0e95e7a1af21a57c3ffe6bdfd710da4f2
servegen servegen-m-small/chunk-9-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-9-trace.csv a4fa0612e1f8d226966d3615def8c91d8f2e266e2647cf00154b27280d595897
servegen servegen-m-small/chunk-10-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-10-trace.csv a3ff3592eb240c4ce1c246a80da383033caf5586b13457257bb41a9bb2eeda89
servegen servegen-m-small/chunk-11-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-11-trace.csv 777950ccaca95e07e6950dc9e0dbbf887cfe5c156bb05226d5c4c71a2ef8c6d2
servegen servegen-m-small/chunk-12-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-12-trace.csv 10b7bb8076afb7afe13a40d3fbf84143966f4015b8e994b6241ee4d72f168ada
servegen servegen-m-small/chunk-13-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-13-trace.csv 933f841df7b07ed6c5781dd66615686fd23399622f003825f373e69915f3d0e4
servegen servegen-m-small/chunk-14-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-14-trace.csv 36adfa4945b82c74fa3db9c92efb7d2808ba2d680493aba4ee07dd2c049fc9ea
servegen servegen-m-small/chunk-15-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-15-trace.csv d8cb7e2e452cd9fc30a87e4040eed5f9130a1ca55a5a480334d2d1646308af04
servegen servegen-m-small/chunk-16-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-16-trace.csv 847697979aa48a5d4f20ad80bd42de7e440819570358d81dccbc8c643b16086b
servegen servegen-m-small/chunk-17-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-17-trace.csv 62fea938a029643d7ebda07c85d3b8d56fa92a0d99524e4c99677d3eedaa569f
servegen servegen-m-small/chunk-18-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-18-trace.csv 33269863b0e24844e3d74672968395348830fc085a0c4d95b68288ab509604a7
servegen servegen-m-small/chunk-19-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-19-trace.csv f8d5960d2ff893b2b481985f186ad75f4cbb1de486e53eb32978f8fb751dc0dd
servegen servegen-m-small/chunk-20-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-20-trace.csv ff5ffef9f771fba6400b1bc9c379e37ee225d4405c0c322347536be9298195ba
servegen servegen-m-small/chunk-21-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-21-trace.csv 9542ea820c0f4cbbc123884a35fa47e62c3d08064883cc82dd09dc8f8e32e994
servegen servegen-m-small/chunk-22-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-22-trace.csv d4ced2d8db99a494cb78aceb9186ecaf46b5efc839bb5e7d66181ecfa917f1db
servegen servegen-m-small/chunk-23-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-23-trace.csv 7cac12e79038c2dd0183e02cd3f567233adb524d7339f7c799210b174da67650
servegen servegen-m-small/chunk-24-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-24-trace.csv 449359e950c82c5b15e7164db5a015f35abd682d0c6f9d4eaf2395f46e8a9cdb
servegen servegen-m-small/chunk-25-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-25-trace.csv b37b679fe75153100d56311f5c0d88defd11d88e367652d3d3e0d504344870f9
servegen servegen-m-small/chunk-26-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-26-trace.csv e563f6cd70bc95e17188d7ad02d5a506b31ff5954b9715fa6a5e801f342b4cc6
servegen servegen-m-small/chunk-27-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-27-trace.csv aef519b50a285baa66abac43c2e6facf3a1e883522d24701ae8b8a28b5b0519f
servegen servegen-m-small/chunk-28-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-28-trace.csv f35e26566bdeeb7f93c69d6363b8ee1b49e8dd003934e68699e5def9dc3b9296
servegen servegen-m-small/chunk-29-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-29-trace.csv 7cf30a4a73e124b67acdcb5169b9e81d2fca54183a390272baf4fde9538b902c
servegen servegen-m-small/chunk-30-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-30-trace.csv c6662f1f99eff179f514c7e58776bd625f871db2733d2412360265a8a3f3b33d
servegen servegen-m-small/chunk-31-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-31-trace.csv 7c1f4c77a5223564a0320bba17e935c5baabb31714970f3b8d0c3eebd0911e86
servegen servegen-m-small/chunk-32-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-32-trace.csv ea961a28fa800866bf4b5311c82339174c5a37440f86884d381bbabe6530db5c
servegen servegen-m-small/chunk-33-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-33-trace.csv b9e53e529c4658db76c204bcc48a25f19896a4c95b80e1bd6a54570db70c4bdb
servegen servegen-m-small/chunk-34-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-34-trace.csv 239e9026dea8a3f1b857e5c832b0725061cefec0686aae5ec85c8d9cf1baf1b4
servegen servegen-m-small/chunk-35-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-35-trace.csv 1556f80d55b55d0678fe33a6275d0c60b4a2790c057d7960daea722668eab1a3
servegen servegen-m-small/chunk-36-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-36-trace.csv baf216727556186f8c95b269887197560b611e48d665a14fbaae0e39a0f36805
servegen servegen-m-small/chunk-37-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-37-trace.csv 219865520367e6ea702f25f9008350f6de355e0e3ef254a95e775aad8652b4a7
servegen servegen-m-small/chunk-38-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-38-trace.csv 2402b90286efb9b04864084ccf58e7cf204e442f1b4ac15fabdd8e254d8e35d0
servegen servegen-m-small/chunk-39-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-39-trace.csv 8f1a93d4b33792889ee014b6f408c2c4e00676fa7be6a47089d03b1713e8f90a
servegen servegen-m-small/chunk-40-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-40-trace.csv 925f9d39787748fff36493bac1d2b0429717be52ed2fe396fdeabc430017943a
servegen servegen-m-small/chunk-41-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-41-trace.csv af3045c2bd1b8db37083e05ffda4812c956eaf1f5a7e45b1426ff561d290a6e7
servegen servegen-m-small/chunk-42-trace.csv https://raw.githubusercontent.com/alibaba/ServeGen/f891d1189eb32b3868dfc443800c4150548c282a/data/language/m-small/chunk-42-trace.csv e58d2bf183d4ac7e410bc85fa9876920aa2652ff43825e8de0534dd545d7186a
'

usage() {
  # the comment at the top of this file, up to its first blank line
  sed -n '2,/^$/p' "$0" | sed -n '/^#/s/^# \{0,1\}//p'
}

here=$(cd "$(dirname "$0")/.." && pwd)
dest="$here/../shared/data/traces"
from=""
list=0
sets=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) [ $# -ge 2 ] || { echo "fetch-traces: --dest needs a directory" >&2; exit 2; }
            dest=$2; shift 2 ;;
    --from-dir) [ $# -ge 2 ] || { echo "fetch-traces: --from-dir needs a directory" >&2; exit 2; }
                from=$2; shift 2 ;;
    --list) list=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "fetch-traces: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) case "$1" in
         azure-2023|azure-2024|burstgpt|mooncake|servegen) sets="$sets $1" ;;
         *) echo "fetch-traces: unknown set '$1' (azure-2023, azure-2024, burstgpt, mooncake, servegen)" >&2
            exit 2 ;;
       esac
       shift ;;
  esac
done
[ -n "$sets" ] || sets="azure-2023 azure-2024 burstgpt mooncake servegen"

if [ "$list" = 1 ]; then
  echo "$MANIFEST" | while read -r set path url sum; do
    [ -n "$set" ] || continue
    printf '%s %s %s %s\n' "$set" "$path" "$url" "$sum"
  done
  exit 0
fi

if [ -n "$from" ] && [ ! -d "$from" ]; then
  echo "fetch-traces: --from-dir $from: not a directory" >&2
  exit 2
fi
command -v sha256sum >/dev/null 2>&1 || { echo "fetch-traces: sha256sum not found" >&2; exit 1; }
fetch=""
if [ -z "$from" ]; then
  if command -v curl >/dev/null 2>&1; then
    fetch=curl
  elif command -v wget >/dev/null 2>&1; then
    fetch=wget
  else
    echo "fetch-traces: neither curl nor wget found (or use --from-dir)" >&2
    exit 1
  fi
fi

# get URL-or-source TMP: the bytes into TMP (which exists, empty)
get() {
  if [ -n "$from" ]; then
    cat "$from/$2" > "$3"
  elif [ "$fetch" = curl ]; then
    curl -fsSL --retry 3 -o "$3" "$1"
  else
    wget -q -O "$3" "$1"
  fi
}

failed=0
tmpfiles=""
trap 'for t in $tmpfiles; do rm -f "$t"; done' EXIT INT TERM
for want in $sets; do
  # a here-document, not a pipe: `failed` must survive the loop
  while read -r set path url sum; do
    [ "$set" = "$want" ] || continue
    out="$dest/$path"
    dir=$(dirname "$out")
    if [ -f "$out" ] && [ "$sum" != unpinned ] &&
       [ "$(sha256sum < "$out" | cut -c1-64)" = "$sum" ]; then
      echo "ok       $path (already there)"
      continue
    fi
    if ! mkdir -p "$dir"; then
      echo "FAILED   $path: cannot create $dir" >&2
      failed=$((failed + 1))
      continue
    fi
    tmp=$(mktemp "$dir/.fetch.XXXXXX") || { failed=$((failed + 1)); continue; }
    tmpfiles="$tmpfiles $tmp"
    if ! get "$url" "$path" "$tmp"; then
      echo "FAILED   $path: cannot ${from:+copy from $from}${from:-download $url}" >&2
      rm -f "$tmp"
      failed=$((failed + 1))
      continue
    fi
    got=$(sha256sum < "$tmp" | cut -c1-64)
    if [ "$sum" = unpinned ]; then
      note="unpinned (not verified here): sha256 $got"
    elif [ "$got" = "$sum" ]; then
      note="sha256 verified"
    else
      echo "FAILED   $path: sha256 $got, expected $sum (file not kept)" >&2
      rm -f "$tmp"
      failed=$((failed + 1))
      continue
    fi
    chmod 0444 "$tmp"
    if ! mv -f "$tmp" "$out"; then
      echo "FAILED   $path: cannot rename into place" >&2
      rm -f "$tmp"
      failed=$((failed + 1))
      continue
    fi
    echo "fetched  $path ($note)"
  done <<MANIFEST_END
$MANIFEST
MANIFEST_END
done
if [ "$failed" -gt 0 ]; then
  echo "fetch-traces: $failed file(s) failed" >&2
  exit 1
fi
