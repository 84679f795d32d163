// Command nqueens is the p2pc example of a fork tree (sdk.Spawn,
// sdk.Wait): it counts the solutions of the N-queens puzzle by divide and
// conquer. A task holds the columns of the queens in the first rows; until
// it has split rows it spawns one child per safe column of the next row,
// waits for them and sums their counts; from split rows on it counts the
// rest by backtracking. Its result (inline data) is the count, in decimal.
//
// Params: n (the board's size, 1 to 16), split (how many rows are split
// into child tasks: the tree's depth), cols (the prefix, [] at the root).
// docs/plugins/nqueens.md lists them.
package main
