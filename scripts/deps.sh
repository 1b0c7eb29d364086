#!/usr/bin/env bash
# Installs, from Debian's packages, whatever the whole project needs and the
# machine lacks: C libraries for cgo, the tools tests use to make audio,
# Node.js for the compat end-to-end suite and Chromium for the dashboard's
# browser test. Idempotent; quiet when all is there.
set -euo pipefail

pkgs=(
  pkg-config gcc
  libespeak-ng-dev espeak-ng espeak-ng-data   # the embedded engine
  libsonic-dev                                # its time-stretching (speed)
  libopus-dev libopusfile-dev opus-tools      # Opus encode, Ogg Opus clips
  libmp3lame-dev lame                         # MP3 encode, MP3 test clips
  libflac-dev                                 # FLAC encode (compat response_format flac)
  libsoxr-dev                                 # resampling
  sox libsox-fmt-all flac                     # test clips in every container
  nodejs npm                                  # e2e suite with the openai SDK
  chromium                                    # the dashboard's browser test (puppeteer-core)
  curl ca-certificates jq                      # the runnable examples in docs (TestAPIExamples)
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node may come from elsewhere (the image ships one): don't install Debian's over it.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  kept=()
  for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || kept+=("$p"); done
  missing=("${kept[@]+"${kept[@]}"}")
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  echo "deps: Go is missing; install Go 1.26 or newer (https://go.dev/dl)" >&2
  exit 1
fi
