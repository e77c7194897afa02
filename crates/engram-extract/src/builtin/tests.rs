//! The builtin extractor's behaviour, one test per rule or guard, on whole requests.

use super::*;
use crate::Turn;
use phrase::MAX_BUILTIN_FACT_CHARS;

fn request(turns: &[(Role, &str)], from_seq: i64) -> ExtractionRequest {
    ExtractionRequest {
        turns: turns
            .iter()
            .enumerate()
            .map(|(i, (role, text))| Turn { seq: i as i64 + 1, role: *role, text: text.to_string() })
            .collect(),
        from_seq,
        instructions: None,
    }
}

fn facts(text: &str) -> Vec<String> {
    extract(&request(&[(Role::User, text)], 0)).into_iter().map(|f| f.fact).collect()
}

fn one(text: &str) -> ExtractedFact {
    let out = extract(&request(&[(Role::User, text)], 0));
    assert_eq!(out.len(), 1, "{text:?} gave {out:?}");
    out.into_iter().next().expect("one fact")
}

fn assert_fact(text: &str, expected: &str, tag: &str) {
    let f = one(text);
    assert_eq!(f.fact, expected, "{text:?}");
    assert!(f.tags.iter().any(|t| t == tag), "{text:?} tags {:?}", f.tags);
    assert!(f.score >= 0.7, "{text:?} score {}", f.score);
}

#[test]
fn hedges_before_the_verb_leave_the_verb_to_the_rules() {
    // Read as the verb, the hedge was conjugated: "Muches preferred …", "Onces …".
    assert_eq!(facts("Ulla, I much preferred rye loaves"), ["Preferred rye loaves"]);
    assert_eq!(facts("Ulla, I once auctioned forty kites"), ["Auctioned forty kites"]);
    assert_eq!(facts("Ulla, I wholeheartedly agree"), Vec::<String>::new());
    assert_eq!(facts("I am sort of looking for a new job"), ["Is looking for a new job"]);
    assert_eq!(facts("I'm kind of a nerd"), ["Is a nerd"]);
    assert_eq!(facts("I am a bit of a feminist"), ["Is a feminist"]);
    assert_eq!(facts("I'm kind of tired"), Vec::<String>::new());
}

#[test]
fn identity() {
    assert_fact("My name is Alice.", "Name is Alice", "identity");
    assert_fact("Hi, I'm Bob!", "Name is Bob", "identity");
    assert_fact("my name's alice", "Name is Alice", "identity");
    assert_fact("My name is John Smith, nice to meet you", "Name is John Smith", "identity");
    assert_fact("my name is john nice to meet you", "Name is John", "identity");
    assert!(facts("I am User 1").is_empty());
    assert_fact("Everyone calls me Al.", "Name is Al", "identity");
    assert_fact("My name is Jean-Luc.", "Name is Jean-Luc", "identity");
    assert_fact("my name is jean-luc", "Name is Jean-Luc", "identity");
    assert_fact("My name is Mary-Jane Watson", "Name is Mary-Jane Watson", "identity");
    assert_fact("My name is Conor O'Brien", "Name is Conor O'Brien", "identity");
    assert_fact("my name is o'brien", "Name is O'Brien", "identity");
    assert_fact("My name is D'Angelo.", "Name is D'Angelo", "identity");
    assert_fact("My name is Nguyen Van An", "Name is Nguyen Van An", "identity");
    assert_fact("My name is Ana Sofía", "Name is Ana Sofía", "identity");
    assert_fact("My name is Ludwig van Beethoven", "Name is Ludwig van Beethoven", "identity");
    assert_fact("My name is Vincent van", "Name is Vincent", "identity");
    assert_eq!(facts("My name is Zoë and I like tea"), ["Name is Zoë", "Likes tea"]);
    assert_fact("Меня зовут... my name is Дмитрий", "Name is Дмитрий", "identity");
    assert!(one("My name is Alice.").score >= 0.9);
}

#[test]
fn location() {
    assert_fact("I live in Paris.", "Lives in Paris", "location");
    assert_fact("I'm from Spain", "Is from Spain", "location");
    assert_fact("I come from a small town in Ohio.", "Is from a small town in Ohio", "location");
    assert_fact("I grew up in Texas", "Grew up in Texas", "location");
    assert_fact("I live in Paris, France, and I love it.", "Lives in Paris, France", "location");
    assert_fact("I live directly on the beach.", "Lives on the beach", "location");
    assert_fact("I live out in the Olympics", "Lives in the Olympics", "location");
    assert_fact("I live up north", "Lives up north", "location");
}

#[test]
fn work() {
    assert_fact("I work as a nurse.", "Works as a nurse", "work");
    assert_fact("I work at Acme.", "Works at Acme", "work");
    // "IT" in capitals is a trade, not "it".
    assert_fact("I work in IT for a hospital", "Works in IT for a hospital", "work");
    assert!(facts("I work in it").is_empty());
    assert_fact("I'm a software engineer.", "Is a software engineer", "work");
    assert_fact("I am retired", "Is retired", "work");
    assert_fact("I teach math at a high school.", "Teaches math at a high school", "work");
    assert_fact("I work construction.", "Works construction", "work");
    assert_fact("I work the night shift at a bar", "Works the night shift at a bar", "work");
    assert_fact("I work 2 jobs", "Works 2 jobs", "work");
    assert_fact("I work a lot.", "Works a lot", "work");
    assert!(facts("I work the register today").is_empty());
}

#[test]
fn family_and_pets() {
    assert_fact("I have two kids.", "Has two kids", "family");
    assert_fact("I'm married", "Is married", "family");
    assert_fact("I have a dog named Rex.", "Has a dog named Rex", "pets");
    assert_fact("My dog's name is Rex", "Has a dog named Rex", "pets");
    assert_fact("My mother is a dentist.", "Mother is a dentist", "family");
    assert_fact("My dad was a professional violinist.", "Dad was a professional violinist", "family");
    assert!(facts("My dad was sick last week").is_empty());
    assert_fact("I got divorced in my late 20s.", "Got divorced", "family");
    // Taking something up is no possession, an adverb between or not.
    assert!(facts("I got really into running after I beat cancer").iter().all(|f| !f.starts_with("Has")));
}

#[test]
fn informal_spelling() {
    assert_fact("i wanna be a doctor lol", "Wants to be a doctor", "goal");
    assert_eq!(facts("i luv my cat"), ["Loves their cat", "Has a cat"]);
}

#[test]
fn preferences() {
    assert_fact("I like hiking.", "Likes hiking", "preference");
    assert_fact("I love to bake cookies.", "Loves baking cookies", "preference");
    assert_fact("I really love swimming in the ocean", "Loves swimming in the ocean", "preference");
    assert_fact("I hate onions", "Hates onions", "preference");
    assert_fact("I dislike onions", "Dislikes onions", "preference");
    assert_fact("I don't like onions.", "Dislikes onions", "preference");
    assert_fact("I prefer tea over coffee.", "Prefers tea over coffee", "preference");
    assert_fact("My favorite color is blue.", "Favorite color is blue", "preference");
    assert_fact("Pizza is my favorite food.", "Favorite food is Pizza", "preference");
    assert_fact("Bob Dylan is my favorite!", "Favorite is Bob Dylan", "preference");
    assert_fact("I like dogs too.", "Likes dogs", "preference");
}

#[test]
fn a_fact_said_again_more_surely_keeps_the_surer_score() {
    let out = extract(&request(&[(Role::User, "Hi. I'm Ottoline by the way. My name is Ottoline.")], 0));
    let names: Vec<_> = out.iter().filter(|f| f.fact == "Name is Ottoline").collect();
    assert_eq!(names.len(), 1, "{out:?}");
    assert!(names[0].score >= 0.9, "{out:?}");
}

#[test]
fn facts_that_tell_nothing_are_dropped() {
    assert!(facts("I have some!").is_empty());
    assert!(facts("I have only been once.").is_empty());
    assert!(facts("I'm from [city].").is_empty());
    assert_eq!(facts("I have some cats"), ["Has some cats"]);
    assert!(facts("I want to go!").is_empty());
    assert!(facts("I try to be.").is_empty());
    assert_eq!(facts("I want to go to college"), ["Wants to go to college"]);
}

#[test]
fn objects_that_name_nothing_in_particular_are_no_facts() {
    assert!(facts("I like doing the same things.").is_empty());
    assert!(facts("I love learning about a lot of different things").is_empty());
    assert!(facts("I enjoy all sorts of stuff").is_empty());
    assert_eq!(facts("I love learning new things"), ["Loves learning new things"]);
    assert_eq!(facts("I'm into the technology side of things"), ["Is into the technology side of things"]);
}

#[test]
fn coordinated_verb_phrases_are_two_facts() {
    assert_eq!(facts("I play the guitar and sing in a band."), ["Plays the guitar", "Sings in a band"]);
    assert_eq!(
        facts("I work at a bank and volunteer at the shelter"),
        ["Works at a bank", "Volunteers at the shelter"]
    );
    // The second verb of a preference is still liked, not done.
    assert_eq!(facts("I like to read and write"), ["Likes reading and writing"]);
    assert_eq!(facts("I play tennis and golf"), ["Plays tennis and golf"]);
    assert_eq!(facts("I love to dance and have fun"), ["Loves dancing"]);
    // An adverb before the first verb; after what one did or likes, having or liking.
    assert_eq!(
        facts("I also work at a bank and volunteer at the shelter"),
        ["Works at a bank", "Volunteers at the shelter"]
    );
    assert_eq!(
        facts("I just started third grade and love to write poetry!"),
        ["Started third grade", "Loves writing poetry"]
    );
    assert_eq!(facts("I like tea and have a cat"), ["Likes tea", "Has a cat"]);
    // Two tastes, each a gerund with its object; not a bare gerund, nor "-ing" words
    // that are no verb.
    assert_eq!(
        facts("I really love eating cheeseburgers and watching war documentaries"),
        ["Loves eating cheeseburgers", "Loves watching war documentaries"]
    );
    assert_eq!(facts("I like hiking and biking"), ["Likes hiking and biking"]);
    assert_eq!(facts("I like to watch tv and go to the gym"), ["Likes watching tv", "Likes going to the gym"]);
    assert_eq!(facts("I like playing guitar and singing"), ["Likes playing guitar and singing"]);
    // Two things one is doing; not a plan's two steps.
    assert_eq!(facts("I'm living in Ohio and working at a supermarket"), ["Lives in Ohio", "Works at a supermarket"]);
    assert_eq!(
        facts("I'm thinking about going back to Somalia and starting a business"),
        ["Is thinking about going back to Somalia and starting a business"]
    );
    assert_eq!(
        facts("I love working on new and challenging projects"),
        ["Loves working on new and challenging projects"]
    );
}

#[test]
fn negations_that_state_a_fact() {
    assert_fact("I don't have any pets.", "Has no pets", "pets");
    assert_fact("I do not have a car", "Has no car", "vehicle");
    assert_fact("I don't have kids yet.", "Has no kids", "family");
    assert_fact("I don't have pets", "Has no pets", "pets");
    assert!(one("I don't have money for rent").score < 0.7);
    assert_fact("I'm not good at math.", "Is not good at math", "hobby");
    assert_fact("I'm not very good at swimming", "Is not good at swimming", "hobby");
    assert_fact("I am not a big fan of mushrooms", "Dislikes mushrooms", "preference");
    assert_fact("I'm not married yet.", "Is not married", "family");
    assert!(facts("I'm not married to the idea").is_empty());
    assert_fact("I never drink alcohol.", "Never drinks alcohol", "diet");
    assert!(facts("I don't have any idea").is_empty());
    assert!(facts("I don't have a clue what you mean").is_empty());
    assert!(facts("I don't have time for that").is_empty());
    assert!(facts("I never said that").is_empty());
}

#[test]
fn relatives_pets_and_possessions_named_in_passing() {
    assert_fact("My twin sister runs marathons too.", "Has a twin sister", "family");
    assert_fact("i'll probably just walk my two dogs on the beach", "Has two dogs", "pets");
    assert_fact("Our kids would eat pizza every night", "Has kids", "family");
    assert_fact("sorry, my older brother's car broke down", "Has an older brother", "family");
    assert_eq!(facts("my husband and daughter are still asleep"), ["Has a husband", "Has a daughter"]);
    assert_eq!(facts("my wife and I love it here and my new puppy too"), ["Has a wife", "Has a puppy"]);
    // A rule that said more wins, wherever the mention was.
    assert_eq!(facts("My dog is old. I have a dog named Rex."), ["Has a dog named Rex"]);
    assert_eq!(facts("I have two kids. My kids love the beach."), ["Has two kids"]);
    assert_eq!(facts("I call my son every night."), ["Calls their son every night", "Has a son"]);
    // A few kinds of things too, unless a fact already names them or they are gone.
    assert_eq!(facts("my truck broke down again"), ["Has a truck"]);
    assert_eq!(facts("my aunt and my uncle visit often"), ["Has an aunt", "Has an uncle"]);
    // (Not "my guitars are all vintage": the clause model may keep that restated.)
    assert_eq!(facts("my guitars need new strings"), ["Has guitars"]);
    assert_eq!(facts("I ride my bike to work."), ["Rides their bike to work"]);
    assert!(facts("we sold our boat last year").is_empty());
    assert!(facts("My dog died last spring").is_empty());
    assert!(facts("My house is a mess").is_empty());
    assert!(facts("My ex wife lives in Ohio").is_empty());
    assert!(facts("My late husband loved gardening").is_empty());
    assert!(facts("My friend's dog is cute").is_empty());
    assert!(facts("My mom says hi").is_empty());
    // Only an "and" right after a relative carries the "my" on.
    assert!(facts("I walked the dog and kittens followed").iter().all(|f| !f.starts_with("Has")));
    assert!(facts("Do you want to meet my dog?").is_empty());
    assert!(facts("If I had kids, my kids would be spoiled").is_empty());
}

#[test]
fn facts_inside_longer_sentences() {
    assert_fact("i'm from india and the traffic there taught me to fear bikes", "Is from india", "location");
    assert_fact("I live in Rome but my family lives in Milan", "Lives in Rome", "location");
    assert_fact("I don't like cold weather at all", "Dislikes cold weather", "preference");
    assert_fact("I have a fear of heights, even boats scare me", "Has a fear of heights", "personality");
    assert_eq!(facts("I was a marine, so I like adrenaline"), ["Was a marine", "Likes adrenaline"]);
    assert_fact("I was a nurse for ten years", "Was a nurse for ten years", "work");
    assert!(one("I was a mess yesterday").score < 0.7);
    assert_fact("I want to go to college in New York", "Wants to go to college in New York", "goal");
    assert!(one("I want to go to the movies").score < 0.7);
    assert!(facts("my job is a lot quieter than yours").is_empty());
    assert!(facts("my job is a lot quieter").is_empty());
    assert_eq!(facts("My job is nursing"), ["Job is nursing"]);
    assert_eq!(facts("me and my wife are taking the boys to Mexico"), ["Has a wife"]);
    assert!(one("I've been awake since four").score < 0.7);
    // Where one is in life ("in finance", "in remission"), not where one is today.
    assert_fact("I'm in finance.", "Is in finance", "identity");
    assert_fact("I'm in remission", "Is in remission", "identity");
    assert_fact("I'm in my early thirties", "Is in their early thirties", "age");
    assert!(one("I'm in bed").score < 0.7);
    assert!(one("I'm in the kitchen").score < 0.7);
    assert!(one("I'm in Paris today").score < 0.7);
}

#[test]
fn run_on_chat() {
    assert_fact("my favorite band is the beatles what about you", "Favorite band is the beatles", "preference");
    assert_fact("i love pizza do you", "Loves pizza", "preference");
    assert_fact("i like hiking how about you", "Likes hiking", "preference");
    assert_eq!(facts("i'm 25 and live with my parents"), ["Is 25 years old", "Lives with their parents"]);
    assert_eq!(facts("I'm a nurse and have two kids"), ["Is a nurse", "Has two kids"]);
    assert_eq!(facts("I play tennis and have a dog"), ["Plays tennis", "Has a dog"]);
    assert!(facts("I am tired and want to sleep").is_empty());
}

#[test]
fn work_and_school_in_ones_history() {
    assert_fact("i'm currently working on my masters degree", "Is working on their masters degree", "education");
    assert!(facts("I'm working on dinner").is_empty());
    assert_fact("i played football in college", "Played football in college", "hobby");
    assert!(facts("I played games last night").is_empty());
}

#[test]
fn a_habit_one_does_not_have_is_a_fact() {
    assert_fact("I don't watch tv.", "Does not watch tv", "hobby");
    assert_eq!(facts("I don't really read much"), ["Does not read much"]);
    assert_eq!(facts("Honestly I don't read."), ["Does not read"]);
    assert_eq!(facts("I don't use facebook at all"), ["Does not use facebook"]);
    assert_eq!(facts("I do not speak Italian"), ["Does not speak Italian"]);
    // What the positive rules refuse stays refused when negated.
    assert!(facts("I don't watch it").is_empty());
    assert!(facts("I don't play with them").is_empty());
    assert!(facts("I don't play around much").is_empty());
    assert!(facts("I don't help with that").is_empty());
    assert!(facts("I don't think so").is_empty());
}

#[test]
fn where_one_lives_said_in_passing() {
    assert_eq!(facts("It is so hot here in Alabama"), ["Lives in Alabama"]);
    assert_eq!(facts("the winters here in the tundra are long"), ["Lives in the tundra"]);
    assert_eq!(
        facts("I play sax here in New Orleans and love it"),
        ["Plays sax here in New Orleans", "Lives in New Orleans"]
    );
    // What the user says of where they live wins.
    assert_eq!(facts("It's cold here in Erie, I live in Pennsylvania."), ["Lives in Pennsylvania"]);
    // A time, a visit or one's own rooms is no home.
    assert!(facts("I'll be there here in the next few days").is_empty());
    assert!(facts("I'll see you here in two weeks").is_empty());
    assert!(facts("We are on vacation here in Maui").is_empty());
    assert!(facts("I'm at the desk here in my office").is_empty());
}

#[test]
fn households_habits_and_history() {
    assert_fact("I don't drive.", "Does not drive", "vehicle");
    assert!(facts("I don't drive to work").is_empty());
    assert_fact("I don't work.", "Does not work", "work");
    assert!(facts("I don't work on weekends, it's nice").iter().all(|f| f != "Does not work"));
    assert_fact("we live on a farm", "Lives on a farm", "location");
    assert!(facts("we live and learn").is_empty());
    assert_fact("sadly i lost my job", "Lost their job", "work");
    assert!(facts("I lost my keys").is_empty());
    assert_fact("i was raised by my grandmother", "Was raised by their grandmother", "family");
    assert_fact("I drink a lot of coffee", "Drinks a lot of coffee", "diet");
}

#[test]
fn facts_after_a_setting_phrase() {
    assert_fact("During the summer I work as a lifeguard at the lake.", "Works as a lifeguard at the lake", "work");
    assert_fact("for my hobby i like to do canning", "Likes doing canning", "preference");
    assert_fact("in my free time i paint", "Paints", "hobby");
    assert_fact("Yes, 5 days a week I dance.", "Dances", "hobby");
    assert_fact("Growing up I lived on a farm", "Lived on a farm", "personal");
    assert!(facts("One time I lived on a farm").is_empty());
    assert!(facts("on sunday she said i was rude").is_empty());
    // Someone else's words about the user are not the user's.
    assert!(facts("at work she thinks i play golf").is_empty());
    assert!(facts("at the moment I'm tired").is_empty());
    assert_fact("hunting is one of my favorite hobbies", "Likes hunting", "preference");
}

#[test]
fn work_and_routines_said_as_habits() {
    assert_fact("i just sell cars lol", "Sells cars", "work");
    assert_fact("I fix bikes for a living", "Fixes bikes for a living", "work");
    assert_fact("I wake up at 4 am every day", "Wakes up at 4 am every day", "habit");
    assert!(facts("I wake up and it's raining").is_empty());
}

#[test]
fn skills_and_what_one_cannot_do() {
    assert_fact("I can cook enchiladas", "Can cook enchiladas", "hobby");
    assert_fact("I can swim.", "Can swim", "hobby");
    assert_fact("funny thing, I can't swim.", "Cannot swim", "hobby");
    assert_fact("I cannot drive a stick shift", "Cannot drive a stick shift", "hobby");
    assert!(one("I can get one for the party").score < 0.7);
    assert!(facts("I can send you the recipe").is_empty());
    assert!(facts("I can't imagine").is_empty());
}

#[test]
fn what_a_relative_clause_adds() {
    assert_eq!(facts("I'm a teacher who lives in the city."), ["Is a teacher", "Lives in the city"]);
    assert_eq!(facts("I am a nurse who really loves gardening"), ["Is a nurse", "Loves gardening"]);
    assert_eq!(facts("I'm a mom who is allergic to cats"), ["Is a mom", "Is allergic to cats"]);
    assert_eq!(facts("I'm a painter who painted a mural"), ["Is a painter"]);
    assert_eq!(facts("I like a singer who lives in Paris"), ["Likes a singer"]);
}

#[test]
fn retirement_and_households() {
    assert_fact("I retired a few years ago.", "Is retired", "work");
    assert!(facts("I retired to bed early").is_empty());
    assert_eq!(facts("We have a dog and a cat"), ["Has a dog", "Has a cat"]);
    assert_eq!(facts("we have two kids"), ["Has two kids"]);
    assert!(facts("We have a lot of dogs around here").is_empty());
}

#[test]
fn how_long_things_have_lasted() {
    assert_fact("I've been divorced twice.", "Has been divorced twice", "family");
    assert_fact("I have been sober for ten years", "Has been sober for ten years", "health");
    assert_fact("I've been in the Boy Scouts for 7 years", "Has been in the Boy Scouts for 7 years", "hobby");
    assert_fact("I have been playing chess for twenty years", "Has been playing chess for twenty years", "hobby");
    assert_fact("I have lived in Berlin for five years now", "Has lived in Berlin for five years", "hobby");
    assert_fact("I've had my cat for ten years", "Has had their cat for ten years", "pets");
    assert!(one("I've been playing a lot since you asked").score < 0.7);
    assert!(one("I've been busy").score < 0.7);
    // What one has taken up, without how long: kept; of the moment or the listener: not.
    assert_fact(
        "I have been volunteering at my local animal shelter.",
        "Has been volunteering at their local animal shelter",
        "hobby",
    );
    assert_fact("I've been rewatching old Pixar movies", "Has been rewatching old Pixar movies", "hobby");
    assert!(one("I've been feeling sick").score < 0.7);
    assert_fact("I've been thinking about changing jobs", "Has been thinking about changing jobs", "hobby");
    assert_fact("I've been considering getting a cat", "Has been considering getting a cat", "pets");
    assert!(one("I've been thinking about dinner").score < 0.7);
    assert!(one("I've been thinking a lot").score < 0.7);
    assert!(facts("I've been thinking about you").is_empty());
    // Of late is news worth keeping; of the day is not.
    assert_fact("I've been baking bread lately", "Has been baking bread lately", "hobby");
    assert_fact("I've been cooking a lot", "Has been cooking", "hobby");
    assert!(one("I've been baking bread all day today").score < 0.7);
    assert_fact("I've been a vegetarian for years", "Has been a vegetarian for years", "hobby");
    assert!(one("I have worked hard today").score < 0.7);
}

#[test]
fn what_one_has_never_done() {
    assert_fact("I have never been married.", "Has never been married", "family");
    assert_eq!(one("i have never been on a plane actually").fact, "Has never been on a plane");
    assert!(one("I have never been on a plane").score < 0.7);
    assert_eq!(one("I've never even left my home state").fact, "Has never left their home state");
    assert_fact("I've never had a cat before.", "Has never had a cat before", "pets");
    assert!(facts("I've never heard of them").is_empty());
    assert!(facts("I have never heard of Fortnite").is_empty());
    assert!(facts("I have never noticed the difference").is_empty());
    assert!(facts("I have never thought about that").is_empty());
    assert!(facts("I've never seen that movie").is_empty());
}

#[test]
fn habits_plans_and_ages_in_the_progressive_and_past() {
    assert_fact("I'm training for a half marathon", "Is training for a half marathon", "hobby");
    assert_fact("I'm moving to Seattle next month!", "Is moving to Seattle next month", "location");
    assert_fact("I am taking online classes", "Is taking online classes", "education");
    assert!(facts("I'm taking a nap").iter().all(|f| f != "Is taking a nap"));
    assert_fact("I just turned 18 yesterday", "Is 18 years old", "age");
    assert_fact("I go to the gym every day", "Goes to the gym every day", "hobby");
    assert_fact("I go to church on Sundays", "Goes to church on Sundays", "hobby");
    assert!(one("I go to the store later").score < 0.7);
    assert!(facts("I just got out of class").is_empty());
    assert!(facts("I got outvoted").is_empty());
}

#[test]
fn diet_and_health() {
    assert_fact("I'm vegetarian.", "Is vegetarian", "diet");
    assert_fact("I am a vegan", "Is a vegan", "diet");
    assert_fact("I'm allergic to peanuts", "Is allergic to peanuts", "health");
    assert_fact("I don't eat meat", "Does not eat meat", "diet");
    assert_fact("I have diabetes.", "Has diabetes", "health");
}

#[test]
fn hobbies_and_sports() {
    assert_fact("I play tennis on weekends.", "Plays tennis on weekends", "hobby");
    assert_fact("I go hiking every Sunday", "Goes hiking every Sunday", "hobby");
    assert_fact("I collect stamps.", "Collects stamps", "hobby");
    assert_fact("I do karate three times a week", "Does karate three times a week", "hobby");
    assert_fact("i do yoga every morning", "Does yoga every morning", "hobby");
    assert!(one("I do a lot of cleaning").score < 0.7);
    assert_fact("I knit.", "Knits", "hobby");
    // An emphatic "do" before a pastime leaves the pastime.
    assert_fact("I do watch a lot of news", "Watches a lot of news", "hobby");
    assert_fact("I do meditate.", "Meditates", "hobby");
    // "do" stays the verb: "electrical" is no pastime.
    assert_eq!(one("I do electrical work").fact, "Does electrical work");
}

#[test]
fn languages() {
    assert_fact("I speak French.", "Speaks French", "language");
    assert_fact("I speak English and Spanish", "Speaks English and Spanish", "language");
    assert_fact("I'm fluent in German", "Is fluent in German", "language");
    assert!(facts("I speak to my mom every day").is_empty());
}

#[test]
fn age_and_birthday() {
    assert_fact("I'm 34 years old.", "Is 34 years old", "age");
    assert_fact("I am 34", "Is 34 years old", "age");
    assert_fact("My birthday is May 3.", "Birthday is May 3", "age");
    assert_fact("My birthday is on May 3rd", "Birthday is May 3rd", "age");
}

#[test]
fn devices() {
    assert_fact("I use a MacBook for work.", "Uses a MacBook for work", "device");
    assert_fact("I have an iPhone", "Has an iPhone", "device");
    assert_fact("I drive a Honda Civic", "Drives a Honda Civic", "vehicle");
}

#[test]
fn plans_and_goals() {
    assert_fact("I plan to visit Japan next year.", "Plans to visit Japan next year", "goal");
    assert_fact("I want to learn guitar.", "Wants to learn guitar", "goal");
    assert_fact("I'm planning to run a marathon", "Plans to run a marathon", "goal");
    assert_fact("My dream is to open a bakery", "Dream is to open a bakery", "goal");
    // A wish is a goal, with the refusals of "I want to …".
    assert_fact("I would love to learn Spanish.", "Wants to learn Spanish", "goal");
    assert_fact("I'd like to be a lawyer", "Wants to be a lawyer", "goal");
    assert_fact("I would really love to move to London", "Wants to move to London", "goal");
    // "try" is small talk to the rules ("I'd love to try it"); the clause model may
    // raise a wish to try something named.
    let rules_alone = training::extract_with(&request(&[(Role::User, "I'd love to try sushi")], 0), None);
    assert!(matches!(&rules_alone[..], [f] if f.fact == "Wants to try sushi" && f.score < 0.7), "{rules_alone:?}");
    assert!(facts("I'd love to try it").is_empty());
    assert!(facts("If I could I would love to travel the world").is_empty());
    assert!(facts("I would love to").is_empty());
    for small_talk in ["I would love to be friends", "I'd love to visit sometime", "I'd love to learn though"] {
        assert!(one(small_talk).score < 0.7, "{small_talk}");
    }
    assert!(one("I want to explore more").score < 0.7);
    assert_fact("I am wanting to be an attorney", "Wants to be an attorney", "goal");
    // A plan in the making, not what one is thinking of right now.
    assert_fact("I'm thinking about getting a dog", "Is thinking about getting a dog", "goal");
    assert_fact("I'm considering retiring early", "Is considering retiring early", "goal");
    assert!(facts("I'm thinking about going to bed now").is_empty());
    assert!(facts("I'm thinking about it").is_empty());
    assert!(facts("I'm thinking about my mom").is_empty());
    assert!(facts("I'm thinking").is_empty());
}

#[test]
fn several_clauses_and_sentences() {
    assert_eq!(
        facts("Hi! I'm a nurse and I live in Boston. I have a cat, but I'm allergic to dogs."),
        vec!["Is a nurse", "Lives in Boston", "Has a cat", "Is allergic to dogs"]
    );
}

#[test]
fn objects_are_cut_at_clause_boundaries() {
    assert_eq!(facts("I love hiking because it is relaxing"), vec!["Loves hiking"]);
    assert_eq!(facts("I live in Rome, but I travel a lot"), vec!["Lives in Rome", "Travels"]);
    assert_eq!(facts("Great. I prefer tea over coffee, by the way."), vec!["Prefers tea over coffee"]);
    assert_eq!(facts("I prefer tea over coffee, honestly."), vec!["Prefers tea over coffee"]);
    assert_eq!(facts("I like hiking, biking, and swimming"), vec!["Likes hiking, biking, and swimming"]);
    assert_eq!(facts("I love spending time with my family"), vec!["Loves spending time with their family"]);
    let long = format!("I like {}", "very long words ".repeat(20));
    assert!(facts(&long).iter().all(|f| f.chars().count() <= MAX_BUILTIN_FACT_CHARS));
}

#[test]
fn groups_lists_and_names_in_objects() {
    assert_fact("I'm in the army.", "Is in the army", "work");
    assert!(one("I'm in the kitchen").score < 0.7);
    assert_fact(
        "I like to play chess, paint, and bake bread.",
        "Likes playing chess, painting, and baking bread",
        "preference",
    );
    assert_fact("I love Nina Simone and B. King", "Loves Nina Simone and B. King", "preference");
    assert_fact("My favorite band is The Who.", "Favorite band is The Who", "preference");
    assert_fact("I'm from the U.S. now", "Is from the U.S.", "location");
    assert_eq!(facts("I'm an engineer and own a studio"), ["Is an engineer", "Owns a studio"]);
    assert!(one("I love the colors").score < 0.7);
    assert_fact("I just got a new job as a nurse", "Has a new job as a nurse", "work");
    assert_fact("I've always wanted a pet turtle", "Wants a pet turtle", "goal");
}

#[test]
fn questions_are_ignored() {
    assert!(facts("Do you like tea?").is_empty());
    assert!(facts("What is my name?").is_empty());
    assert!(facts("what is my name").is_empty());
    assert!(facts("I live in Paris?").is_empty());
    assert!(facts("Am I allergic to peanuts").is_empty());
}

#[test]
fn hypotheticals_are_ignored() {
    assert!(facts("If I lived in Paris, I would walk everywhere.").is_empty());
    // "I would love to visit Japan" is a wish (`plans_and_goals`); "I would walk" is not.
    assert!(facts("I would walk everywhere.").is_empty());
    assert!(facts("I wish I had a dog.").is_empty());
    assert!(facts("Imagine I lived in Rome.").is_empty());
    assert!(facts("I'd be a pilot").is_empty());
    assert!(facts("Maybe I will learn French").is_empty());
    // "I think I like tea" is a hedge on a fact (`i_think_before_ones_own_clause_is_a_hedge`).
    assert!(facts("I think I might learn French").is_empty());
}

#[test]
fn negations_are_not_facts() {
    assert!(facts("I don't live in Paris anymore.").is_empty());
    assert!(facts("I no longer work at Acme.").is_empty());
    assert!(facts("I never liked tea.").is_empty());
    assert!(facts("I'm not vegetarian.").is_empty());
    assert!(facts("I used to live in Paris").is_empty());
    assert!(facts("I used to be a lot happier").is_empty());
    assert!(facts("I used to be a big fan of jazz").is_empty());
    // The work one did is one's history.
    assert_fact("I used to be a pilot, flew cargo planes for thirty years.", "Used to be a pilot", "work");
    assert_fact("I used to work in finance", "Used to work in finance", "work");
    assert!(facts("I don't work at Acme").is_empty());
    assert!(facts("I live in Paris, not Rome").iter().all(|f| f == "Lives in Paris"));
}

#[test]
fn other_people_are_not_the_user() {
    assert!(facts("My friend lives in Rome.").is_empty());
    assert!(facts("You like tea.").is_empty());
    assert!(facts("He works at Acme and she loves dogs").is_empty());
    assert!(facts("My friend's name is Bob").is_empty());
    // That the user has a sister is theirs; where she lives is not.
    assert_eq!(facts("My sister lives in Rome"), ["Has a sister"]);
    assert_eq!(facts("You like tea and I like coffee."), vec!["Likes coffee"]);
}

#[test]
fn conversational_filler_is_ignored() {
    assert!(facts("I love that!").is_empty());
    assert!(facts("I like your idea.").is_empty());
    assert!(facts("I'm glad you like it.").is_empty());
    assert!(facts("I'm not sure.").is_empty());
    assert!(facts("I'm a big fan of both of them").is_empty());
    assert!(facts("I have to go now").is_empty());
    assert!(facts("I have a question").is_empty());
    assert!(facts("I have a lot of work to do").is_empty());
    assert!(facts("I have a few questions").is_empty());
    assert!(facts("I have a couple days off").is_empty());
    assert!(facts("I have a lot of favorite movies").is_empty());
    assert!(facts("I have a lot").is_empty());
    assert!(facts("I have some questions").is_empty());
    assert!(facts("I have some free time this week").is_empty());
}

#[test]
fn things_one_has_counted() {
    assert_fact("I have a lot of new clients.", "Has a lot of new clients", "possession");
    assert_fact("I have a few friends", "Has a few friends", "possession");
    assert_fact("I have a couple of horses", "Has a couple of horses", "pets");
}

#[test]
fn only_new_user_turns_are_read() {
    let req = request(
        &[
            (Role::User, "I live in Paris."),
            (Role::Assistant, "I love tea."),
            (Role::User, "I play chess."),
            (Role::System, "I am a system prompt."),
            (Role::Tool, "I speak French."),
        ],
        1,
    );
    let out: Vec<String> = extract(&req).into_iter().map(|f| f.fact).collect();
    assert_eq!(out, vec!["Plays chess"]);
}

#[test]
fn output_is_deduplicated_and_ordered() {
    let req = request(
        &[(Role::User, "I like tea. I live in Oslo."), (Role::User, "i like TEA!"), (Role::User, "I LIKE tea")],
        0,
    );
    let out: Vec<String> = extract(&req).into_iter().map(|f| f.fact).collect();
    assert_eq!(out, vec!["Likes tea", "Lives in Oslo"]);
    assert_eq!(extract(&req), extract(&req));
}

/// Hostile input must cost time linear in its length: `text` repeated to 8 KiB and to
/// 64 KiB, each timed at its best of five runs (other tests share the cores). The
/// 1 s bound is only a guard against a quadratic blow-up; the ratio catches
/// super-linear growth long before that (a quadratic scan takes 64 times as long
/// for 8 times the input). The 150 ms of slack absorbs allocator and cache effects of
/// an unoptimised build; before the fix, 64 KiB of commas took over a minute.
#[track_caller]
fn assert_linear(unit: &str) {
    // The timing tests take turns, so that they do not slow each other down.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let sized = |bytes: usize| unit.repeat(bytes.div_ceil(unit.len()));
    let best = |text: &str| {
        let req = request(&[(Role::User, text)], 0);
        (0..5)
            .map(|_| {
                let started = std::time::Instant::now();
                std::hint::black_box(extract(&req));
                started.elapsed()
            })
            .min()
            .unwrap_or_default()
    };
    let (small, large) = (best(&sized(8 * 1024)), best(&sized(64 * 1024)));
    let name = unit.chars().take(20).collect::<String>();
    assert!(large < std::time::Duration::from_secs(1), "{name:?}: 64 KiB took {large:?}");
    assert!(
        large < small * 8 + std::time::Duration::from_millis(150),
        "{name:?}: 8 KiB took {small:?}, 64 KiB took {large:?}"
    );
}

#[test]
fn punctuation_costs_linear_time() {
    assert_linear(",");
    assert_linear(";");
    assert_linear(".,;:!?-()'\"");
    assert_linear(", I");
}

#[test]
fn periods_inside_one_long_chunk_cost_linear_time() {
    assert_linear("a.-");
    assert_linear("a.a.");
    assert_linear("Dr.-");
}

#[test]
fn one_huge_word_costs_linear_time() {
    assert_linear("a");
    assert_linear("a-");
    assert_linear("I'");
}

#[test]
fn a_long_realistic_message_costs_linear_time() {
    assert_linear(
        "Hi! I'm Alice and I live in Paris, France. I like hiking, biking, and swimming; \
         my favorite color is blue. I don't eat meat, but I love cheese. Do you like tea? \
         I work as a nurse at St. Mary's, and my dog's name is Rex.\n",
    );
}

#[test]
fn vague_patterns_score_below_default_threshold() {
    assert!(one("I'm going to the store later").score < 0.7);
    assert!(one("I'm going to grab lunch").score < 0.7);
    assert!(one("I'm going to bake cookies tonight").score < 0.7);
    // A plan for one's life is kept.
    assert_fact("I'm going to retire in a few years", "Is going to retire in a few years", "goal");
    assert_fact("I am going to be a nurse.", "Is going to be a nurse", "goal");
    assert!(one("I love the colors").score < 0.7);
    // "The" a side of what is being talked about, or a list of them: a reaction.
    assert!(one("I love the food").score < 0.7);
    assert!(one("I love the story and the characters").score < 0.7);
}

#[test]
fn i_think_before_ones_own_clause_is_a_hedge() {
    assert_fact("I think I'd like to move to London.", "Wants to move to London", "goal");
    assert_fact("I think my favorite color is black!", "Favorite color is black", "preference");
    assert_fact("Oh I guess that I have a cat", "Has a cat", "pets");
    // An opinion about something else states nothing about the speaker.
    assert!(facts("I think the movie was great").is_empty());
}

#[test]
fn a_taste_for_the_beach_is_kept() {
    // "The" in general, not pointing at anything said before.
    assert_fact("I love the beach!", "Loves the beach", "preference");
    assert_fact("I really like the outdoors", "Likes the outdoors", "preference");
    assert_fact("I hate the cold", "Hates the cold", "preference");
    // "The colors" of something shown; "the color blue" names one.
    assert_fact("I love the color blue", "Loves the color blue", "preference");
}

#[test]
fn a_polite_distaste_is_a_dislike() {
    assert_fact("I don't care for real physical sports", "Dislikes real physical sports", "preference");
    assert_fact("I do not care much for chicken.", "Dislikes chicken", "preference");
    // Only "care for": without that test, "about" would be skipped like "for".
    assert!(facts("I don't care much about sports").is_empty());
}

/// On human chat (the Multi-Session Chat development split) these matched a persona
/// sentence about half the time, as often as the facts stored at 0.7, and storing them
/// cost Synthetic-Persona-Chat nothing: people describe themselves this plainly.
#[test]
fn plain_traits_possessions_and_beginnings_are_stored() {
    assert_fact("I have blonde hair.", "Has blonde hair", "possession");
    assert_fact("I am shy", "Is shy", "personality");
    assert_fact("I started a pottery class", "Started a pottery class", "hobby");
}

#[test]
fn first_person_clauses_with_verbs_no_rule_knows() {
    assert_fact("I foster old furniture for a charity.", "Fosters old furniture for a charity", "personal");
    assert_eq!(
        facts("Not much. I restore old furniture, and I breed rabbits."),
        ["Restores old furniture", "Breeds rabbits"]
    );
    assert!(facts("I think the movie was great").is_empty());
    assert!(facts("I used to breed rabbits").is_empty());
}

/// The facts of the user's `answer` to the agent's `question`.
fn asked(question: &str, answer: &str) -> Vec<String> {
    let turns = [(Role::Assistant, question), (Role::User, answer)];
    extract(&request(&turns, 0)).into_iter().map(|f| f.fact).collect()
}

#[test]
fn short_answers_to_yes_no_questions() {
    assert_eq!(asked("Cool. Do you have any pets?", "No, I don't. I travel a lot."), ["Has no pets", "Travels"]);
    assert_eq!(asked("Do you play the guitar?", "Yes! Every day."), ["Plays the guitar"]);
    assert_eq!(facts("Do you like opera? I don't."), ["Dislikes opera"]);
    // Only the first sentence after the question answers it.
    assert!(asked("Do you play the guitar?", "Hi. Yes.").is_empty());
    assert!(asked("Do you play the guitar?", "Yes, but I hate it.").iter().all(|f| f != "Plays the guitar"));
    assert!(asked("Do you think so?", "Yes.").is_empty());
}

#[test]
fn a_place_given_as_the_answer_to_where_one_lives() {
    assert_eq!(asked("So where do you live?", "Chicago, in a tiny flat downtown."), ["Lives in Chicago"]);
    assert_eq!(asked("Cool. Where are you from?", "Canada!"), ["Is from Canada"]);
    assert!(asked("Where do you live?", "Haha, good question.").is_empty());
    assert!(asked("Where do you live?", "That's far away").is_empty());
    assert!(asked("Where do you live?", "Nowhere really").is_empty());
    assert!(asked("Where do you work?", "Chicago, in a tiny flat downtown.").is_empty());
}

#[test]
fn relatives_and_pets_the_agent_calls_the_users() {
    assert_eq!(asked("How is your daughter settling in?", "Great, she loves the dorm."), ["Has a daughter"]);
    assert_eq!(asked("Did your two cats like the new flat?", "They hide all day"), ["Has two cats"]);
    let out = extract(&request(&[(Role::Assistant, "Say hi to your husband!"), (Role::User, "I will tell him")], 0));
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].fact.as_str(), out[0].score), ("Has a husband", 0.7));
    // What the user says of them wins ("Has a dog named Rex" says more).
    assert_eq!(asked("How is your dog?", "I have a dog named Rex, he is fine"), ["Has a dog named Rex"]);
    // Denied, supposed, or said by someone else than the agent: not the user's.
    assert_eq!(asked("How is your dog?", "I don't have a dog, that was my neighbour's"), ["Has no dog"]);
    assert!(asked("How is your wife?", "No, she left me last year").is_empty());
    assert!(asked("If you had kids, would your kids play chess?", "They would love it").is_empty());
    assert!(asked("Is your brother coming?", "What lovely weather today").is_empty());
    assert!(asked("I'm so sorry about your husband.", "Thank you. He loved this garden.").is_empty());
    let earlier = [(Role::User, "Is your dog friendly?"), (Role::User, "He looks it")];
    assert!(extract(&request(&earlier, 1)).is_empty());
    let system = [(Role::System, "You keep a dog; talk about your dog"), (Role::User, "Tell me about him")];
    assert!(extract(&request(&system, 0)).is_empty());
}

#[test]
fn a_reaction_typed_without_a_comma_does_not_hide_the_clause_after_it() {
    assert_eq!(facts("that's ok i don't drink wine."), ["Does not drink wine"]);
    assert_eq!(facts("that ok i don't drink wine."), ["Does not drink wine"]);
    assert_eq!(facts("No worries I have two ferrets."), ["Has two ferrets"]);
    assert_eq!(facts("Thats so great i have a kayak"), ["Has a kayak"]);
}

#[test]
fn a_garbled_clause_gives_no_conjugated_pronoun() {
    // Typed in a hurry: the word after "I" is not a verb, so there is no fact to state.
    assert_eq!(facts("Yeah I its quite not that hard to understand the rules of it"), Vec::<String>::new());
    assert_eq!(facts("lol I the dog runs the house"), Vec::<String>::new());
}

#[test]
fn short_answers_to_be_and_have_questions() {
    assert_eq!(asked("Are you a teacher?", "Yes, I am."), ["Is a teacher"]);
    assert_eq!(asked("Are you afraid of spiders?", "Yeah."), ["Is afraid of spiders"]);
    // "I am not …" stays the rules' call, which keeps no such negation.
    assert!(asked("Are you a teacher?", "I'm not.").is_empty());
    assert_eq!(asked("Have you been to Japan?", "I haven't."), ["Has not been to Japan"]);
    assert_eq!(asked("Have you ever been to Japan?", "No never!"), ["Has never been to Japan"]);
    assert_eq!(asked("Have you been to Japan?", "Of course!"), ["Has been to Japan"]);
    // Plans, moods and the moment are no lasting fact, whatever the answer.
    assert!(asked("Are you going to the fair?", "Yes!").is_empty());
    assert!(asked("Are you sure?", "Absolutely.").is_empty());
    assert!(asked("Have you eaten?", "Yes.").is_empty());
    // An answer that says more than yes or no is read as it is said.
    assert!(asked("Are you a teacher?", "Yes, sort of.").is_empty());
}

#[test]
fn more_ways_to_say_yes_and_no() {
    assert_eq!(asked("Do you play the guitar?", "Absolutely!"), ["Plays the guitar"]);
    assert_eq!(asked("Do you smoke?", "Nah."), ["Does not smoke"]);
    assert_eq!(asked("Do you ever go hiking?", "Yes indeed."), ["Goes hiking"]);
    assert!(asked("Do you play the guitar?", "Yes and no.").is_empty());
}

#[test]
fn a_subjectless_sentence_after_a_first_person_one_is_the_speakers() {
    assert_eq!(
        facts("I live in the mountains. Just drive my old van and listen to jazz."),
        ["Lives in the mountains", "Drives their old van and listen to jazz"]
    );
    // Without a first-person sentence before it, it may be a request.
    assert!(facts("Drive my old van.").is_empty());
    assert!(facts("Do you? Just drive my old van.").is_empty());
}
