# Three subs called in turn, each spinning a fixed number of iterations
# per round so that their CPU time splits 50/30/20 (tests/perl.rs).
# Arguments: seconds, iterations per round. Says the rounds run at the
# end (scripts/bench/reference_cost.py).
use strict;
use warnings;

sub spin {
    my ($n) = @_;
    my $x = 0;
    $x += $_ for 1 .. $n;
    return $x;
}

sub fifty  { spin(5 * $_[0]) }
sub thirty { spin(3 * $_[0]) }
sub twenty { spin(2 * $_[0]) }

$| = 1;
my $seconds = shift // 30;
my $unit = shift // 2000;
print "ready\n";
my $until = time() + $seconds;
my $rounds = 0;
while (time() < $until) {
    fifty($unit);
    thirty($unit);
    twenty($unit);
    $rounds++;
}
print "rounds $rounds\n";
