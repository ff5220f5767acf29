#!/bin/bash
pids=(); for i in 1 2; do ( while :; do :; done ) & pids+=($!); done
trap 'for p in ${pids[@]}; do kill $p; done' EXIT
"$@"
