#!/usr/bin/python3
"""peak_sim.py - why the library's peak is chosen with one half of the samples and read from the other.

A simulation of the sampled in-use estimate over a plateau: N blocks of S bytes live, replaced one at a
time (a cache turning over) K times, sampled as the library samples them (a block of s bytes with
p = 1 - exp(-s/R), weighing s/p).  It compares, over many seeds, three estimates of the peak (the true
in-use, N * S, all along):

  plain max       the highest value the full estimate reaches: biased upwards, the more the longer the
                  plateau, because its noise is drawn again at each turnover and the maximum keeps the
                  highest draw;
  B at argmax A   the library's: each mark of the sampling process goes to half A or half B at random
                  (so a sampled block is A's, B's or both, with probabilities q/(1+q), q/(1+q),
                  (1-q)/(1+q), q = sqrt(1 - p), and weighs s/p_h in its halves, p_h = p/(1+q)); A's
                  estimate chooses the moment, B's estimate there is the peak: unbiased, twice the
                  variance;
  mean of both    B at A's highest and A at B's highest, averaged: unbiased, less variance, but two
                  moments, so no one time for the peak.

Usage: /usr/bin/python3 bench/peak_sim.py [SEEDS]   (default 300; standard library only)
"""
import math
import random
import sys

RATE = 65536
SIZE = 65536
BLOCKS = 1600


def run(turnover, seed):
    rnd = random.Random(seed)
    p = 1 - math.exp(-SIZE / RATE)
    q = math.sqrt(1 - p)
    p_half = p / (1 + q)
    w, w_half = SIZE / p, SIZE / p_half

    def draw():                       # (in A, in B) of one block
        if rnd.random() >= p:
            return (0, 0)
        u = rnd.random()
        if u < q / (1 + q):
            return (1, 0)
        if u < 2 * q / (1 + q):
            return (0, 1)
        return (1, 1)

    live = [draw() for _ in range(BLOCKS)]
    full = sum(1 for a, b in live if a or b) * w
    half_a = sum(a for a, _ in live) * w_half
    half_b = sum(b for _, b in live) * w_half
    best_full, best_a, b_at_a, best_b, a_at_b = full, half_a, half_b, half_b, half_a
    for _ in range(int(turnover * BLOCKS)):
        i = rnd.randrange(BLOCKS)
        a, b = live[i]
        full -= w if a or b else 0
        half_a -= a * w_half
        half_b -= b * w_half
        live[i] = draw()
        a, b = live[i]
        full += w if a or b else 0
        half_a += a * w_half
        half_b += b * w_half
        best_full = max(best_full, full)
        if half_a > best_a:
            best_a, b_at_a = half_a, half_b
        if half_b > best_b:
            best_b, a_at_b = half_b, half_a
    truth = BLOCKS * SIZE
    return best_full / truth - 1, b_at_a / truth - 1, (b_at_a + a_at_b) / 2 / truth - 1


def main():
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    print("%d blocks of %d bytes at rate %d, %d seeds: bias and sd of the peak, relative to the truth"
          % (BLOCKS, SIZE, RATE, seeds))
    for turnover in (0, 1, 10, 100):
        runs = [run(turnover, seed) for seed in range(seeds)]
        for k, name in enumerate(("plain max", "B at argmax A", "mean of both")):
            values = [r[k] for r in runs]
            mean = sum(values) / len(values)
            sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            print("turnover %5g  %-14s bias %+6.2f%%  sd %5.2f%%" % (turnover, name, 100 * mean, 100 * sd))


if __name__ == "__main__":
    main()
