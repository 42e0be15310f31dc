# pl_workload.pl - an allocation-heavy Perl workload for bench/run.sh (Debian's perl uses the system
# malloc: perl -V:usemymalloc says 'n').  Usage: perl pl_workload.pl [scale]  (default 1)
use strict;
use warnings;

my $scale = $ARGV[0] // 1;
my $n = int(40000 * $scale);
my (%count, @rows);
for my $i (0 .. $n - 1) {
  my $w = 'w' . ($i * 7919 % 5003);
  $count{$w}++;
  push @rows, { id => $i, name => $w, tags => [substr($w, 0, 2), substr($w, -2)], text => "row $i of $w" };
}
my $text = join("\n", map { join(',', $_->{id}, $_->{name}, @{ $_->{tags} }, $_->{text}) } @rows);
my @back = map { [split /,/] } split /\n/, $text;
(my $copy = $text) =~ s/w(\d+)/W$1!/g;
my @sorted = sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count;
my %index;
push @{ $index{ substr($_->[1], 0, 3) } }, $_->[0] for @back;
my $tree;
$tree = [$tree, $_, "$_"] for 1 .. int(20000 * $scale);
my $s = '';
$s .= sprintf('%d:%s;', $_, $sorted[$_ % @sorted]) for 1 .. int(20000 * $scale);
printf "%d %d %d %d %d\n", scalar(keys %count), scalar(@back), length($copy) % 1000, scalar(keys %index),
  length($s) % 1000;
