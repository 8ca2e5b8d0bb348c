# Prints each sub's inclusive time in a Devel::NYTProf profile as folded
# lines, `Package::sub MICROSECONDS` (tests/perl.rs reads them as the
# reference's shares). Argument: the profile (nytprof.out).
use strict;
use warnings;
use Devel::NYTProf::Data;

my $profile = Devel::NYTProf::Data->new({ filename => shift, quiet => 1 });
my $subs = $profile->subname_subinfo_map;
for my $name (sort keys %$subs) {
    my $incl = $subs->{$name}->incl_time;
    printf "%s %d\n", $name, $incl * 1e6 if $incl > 0;
}
