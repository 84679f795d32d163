# A stand-in for a renderer that stamps every image it writes, as real
# ones do: band $1 (8 rows) of a 64x64 grey gradient as a plain PGM, with
# the render time in a header comment. Two runs of one band differ only in
# that line. Run by examples/render.yaml: sh render.sh BAND
band=$1
{
  echo P2
  echo "# rendered $(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"
  echo 64 8
  echo 255
  awk -v b="$band" 'BEGIN {
    for (y = 0; y < 8; y++) {
      for (x = 0; x < 64; x++) printf "%d ", (x * 2 + (b * 8 + y) * 2) % 256
      print ""
    }
  }'
} > band.pgm
